// Internal: choosing each rank's GPU for a device run, with errors every rank agrees on.
#pragma once

#include <memory>
#include <string>

#include "comm/node_local.hpp"  // node_local_rank: the GPU slot
#include "tenax/communicator.hpp"
#include "tenax/execution.hpp"

namespace tenax::detail {

// The execution context of this rank for a device run: CUDA device (node-local rank mod the devices this process
// sees). Collective over `world`, and every rank throws the same way: UsageError on every rank when any rank has no
// CUDA build or no usable GPU, or when two ranks would share one physical GPU (NCCL refuses two ranks on one device),
// naming the fix; DeviceError on every rank when a rank's GPU failed to initialise.
std::unique_ptr<ExecutionContext> make_cuda_context(Communicator& world);

}  // namespace tenax::detail
