// The launcher's read-only view of the checkpoint directory (format in docs/checkpoint-format.md): which checkpoint a
// restart would resume from. The launcher never opens a checkpoint's data; the program loads and verifies it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tenax::launch {

// The highest N for which `<dir>/step_<N>/manifest.json` exists: the newest committed checkpoint, the one the loader
// tries first. The manifest is written last, after every shard is durable, and the directory is renamed from
// step_<N>.tmp only then, so its presence is the commit. `latest` is not read: a crash between the rename and the
// pointer's update leaves it one checkpoint behind, and the loader scans the directory for the same reason.
// -1 when there is none (or the directory does not exist). Throws IoError when the directory cannot be listed.
std::int64_t newest_committed_checkpoint(const std::string& dir);

// N for an entry name that is exactly "step_<decimal digits>" with N within int64 (not step_7.tmp, step_7.deleting,
// step_7.superseded); -1 for any other name.
std::int64_t checkpoint_step_of(std::string_view name);

}  // namespace tenax::launch
