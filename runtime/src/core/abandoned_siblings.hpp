// Internal (tenax_core: the data writers and tenax-launch share it). The temporary folders a dataset writer or a
// staging copy works in beside its target (and tenax-launch's folders of Open MPI's shared-memory files):
// "<target>.<kind>-<node>-<pid>-<n>", renamed to the target when complete or removed when abandoned. A writer killed
// outright (SIGKILL, the OOM killer, a job past its time limit) leaves its folder behind, as large as what it had
// written: an encode's partial dataset, or a partial staged copy on a node-local disk, whose space the next job's
// free-space check would then miss for good. The next writer on the same node removes the folders no living writer
// holds.
//
// A living writer holds an exclusive flock(2) on its folder for as long as it works in it: that tells a folder in use
// from an abandoned one across pid namespaces (containers) and whatever pid a later process gets. Where the file
// system keeps no locks on folders (NFS opens them read-only, which its locks refuse), a folder counts as abandoned
// when no process of its pid runs on this host (and it is not this process's own).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/unique_fd.hpp"

namespace tenax::detail {

// This process's temporary folder of `target`, made (with `mode`) and locked: its path, and the descriptor that holds
// the lock (invalid where the file system keeps none) until it is closed. `kind` is "tmp", "discard" or "mpi"; `node`
// names this host, without '/'. A name some earlier process left is skipped. Returns 0, or the errno of the mkdir.
struct SiblingDir {
  std::string path;
  UniqueFd lock;
};
int make_sibling_dir(const std::string& target, const std::string& kind, const std::string& node, SiblingDir& out,
                     mode_t mode = 0755);

// A fresh name for a folder of `target` that is moved there (rename) rather than made; lock_sibling() then marks it.
std::string sibling_name(const std::string& target, const std::string& kind, const std::string& node);
UniqueFd lock_sibling(const std::string& path);

// Removes the folders of `kind` and `node` beside `target` that no living writer holds, for every target in the same
// folder whose name `same_family` accepts (a staging directory's other datasets too; nullptr: `target` alone). Left
// alone: a locked folder, one whose process still runs (where there are no locks), another user's, links, and anything
// named otherwise. Returns what was removed, each as "<path> (pid N)". Best effort: a folder that cannot be listed or
// removed is left.
std::vector<std::string> remove_abandoned_siblings(const std::string& target, const std::string& kind,
                                                   const std::string& node,
                                                   bool (*same_family)(const std::string& name) = nullptr);

}  // namespace tenax::detail
