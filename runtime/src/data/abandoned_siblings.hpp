// The temporary folders a dataset writer or a staging copy works in beside its target: "<target>.<kind>-<node>-<pid>-
// <n>", renamed to the target when complete or removed when abandoned. A writer killed outright (SIGKILL, the OOM
// killer, a job past its time limit) leaves its folder behind, as large as what it had written: an encode's partial
// dataset, or a partial staged copy on a node-local disk, whose space the next job's free-space check would then miss
// for good. The next writer of the same target on the same node removes those whose process no longer runs there.
#pragma once

#include <string>
#include <vector>

namespace tenax::data {

// A fresh name for this process's temporary folder of `target` ("tmp" or "discard" as `kind`; `node` names this host,
// without '/').
std::string sibling_name(const std::string& target, const std::string& kind, const std::string& node);

// Removes the folders sibling_name() named for `target`, `kind` and `node` whose process is gone (no process of that
// pid runs on this host). Left alone: a living process's (another writer may be working in it), another user's, links
// and anything named otherwise. Returns what was removed, each as "<path> (pid N)". Best effort: a folder that cannot
// be listed or removed is left.
std::vector<std::string> remove_abandoned_siblings(const std::string& target, const std::string& kind,
                                                   const std::string& node);

}  // namespace tenax::data
