// Internal: the host memory limit in force while the engine builds a model on this rank (TENAX_MEMORY_LIMIT): with
// `auto`, the memory the node has available (or its memory cgroup leaves) shared evenly by the node's ranks. A model
// over it is refused by a UsageError that names the sizes and the ways out, instead of the kernel's OOM killer ending
// the job (and perhaps other jobs on the node) after minutes of pre-touching pages.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/host_memory.hpp"

namespace tenax::detail {

// Call on every rank right after a collective and before any of the model is allocated, so that a node's ranks read
// the same free memory. `node_ranks`: this rank's node's ranks. `where()` names the rank in the error ("rank 3,
// pipeline stage 1 of 2"). nullptr when the setting is off, or auto and the available memory cannot be read. Throws
// UsageError for a TENAX_MEMORY_LIMIT that is no valid setting.
std::unique_ptr<HostMemoryLimit> model_memory_limit(int node_ranks, std::function<std::string()> where);

}  // namespace tenax::detail
