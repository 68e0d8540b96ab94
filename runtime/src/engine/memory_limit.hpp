// Internal: the host memory limit in force while the engine builds a model (TENAX_MEMORY_LIMIT). With `auto`, the
// ranks of a node share one budget, 7/8 of what the node has available (or its memory cgroup leaves), counted in memory
// they share: a pipeline's first and last stages (embedding, output head) may take more than the middle ones, as long
// as the node's total fits. With a size, each rank has its own. A model over it is refused by a UsageError that
// names the sizes and the ways out, instead of the kernel's OOM killer ending the job (and perhaps other jobs on the
// node) after minutes of pre-touching pages.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "comm/node_shared_words.hpp"
#include "core/host_memory.hpp"
#include "tenax/communicator.hpp"

namespace tenax::detail {

class ModelMemoryLimit {
 public:
  // Collective over `world`, before any of the model is allocated. `where()` names this rank in the error ("rank 3
  // (pipeline stage 1 of 2, ...)"). Throws UsageError on every rank for a TENAX_MEMORY_LIMIT that is no valid setting.
  ModelMemoryLimit(Communicator& world, std::function<std::string()> where);
  // Collective over the node's ranks: lifts the limit and frees the shared count. Every rank calls it once the model is
  // built; after an error the limit goes with the object (the shared count is left to MPI_Finalize).
  void lift();

 private:
  std::unique_ptr<NodeSharedWords> node_;
  std::unique_ptr<HostMemoryLimit> limit_;
};

}  // namespace tenax::detail
