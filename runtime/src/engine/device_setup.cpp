#include "engine/device_setup.hpp"

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "comm/agreement.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"

namespace tenax::detail {

std::unique_ptr<ExecutionContext> make_cuda_context(Communicator& world) {
  const LocalRank local = node_local_rank(world);
  std::unique_ptr<ExecutionContext> ctx;
  std::string problem;
  // 0: fine, 1: a usage problem (no CUDA build, no GPU), 2: the device failed (a DeviceError: a driver or hardware
  // problem, which a restart may not share).
  std::int32_t failure = 0;
  try {
    const int devices = cuda_device_count();
    // With no device, cuda() throws the UsageError that says so (or that this build has no CUDA).
    ctx = ExecutionContext::cuda(devices > 0 ? local.rank % devices : 0);
  } catch (const UsageError& e) {
    problem = e.what();
    failure = 1;
  } catch (const std::exception& e) {
    problem = e.what();
    failure = 2;
  }
  // A rank that cannot run must not leave the others waiting in NCCL's initialisation: agree first.
  world.all_reduce(&failure, &failure, 1, DType::I32, ReduceOp::Max);
  if (failure != 0) {
    if (problem.empty()) problem = "device cuda: another rank cannot use its GPU (see its message)";
    if (failure == 2) throw DeviceError(problem);
    throw UsageError(problem);
  }

  // Each physical GPU at most once: two ranks on one device would make NCCL fail (or hang) at initialisation.
  const std::vector<std::string> uuids = all_gather_strings(world, ctx->device_uuid());
  for (int r = 0; r < world.size(); ++r)
    for (int q = 0; q < r; ++q)
      if (uuids[static_cast<std::size_t>(q)] == uuids[static_cast<std::size_t>(r)])
        throw UsageError("device cuda: ranks " + std::to_string(q) + " and " + std::to_string(r) +
                         " would share one GPU (" + std::to_string(local.size) + " ranks on this node, " +
                         std::to_string(cuda_device_count()) +
                         " GPU(s) visible to each); NCCL needs one GPU per rank: start at most as many ranks per "
                         "node as it has GPUs, or give each rank its own GPU (CUDA_VISIBLE_DEVICES)");
  TENAX_LOG(Info, "engine") << "rank " << world.rank() << " (local " << local.rank << " of " << local.size
                            << ") computes on " << ctx->describe();
  return ctx;
}

}  // namespace tenax::detail

namespace tenax {

Device parse_device(const std::string& text) {
  if (text == "cpu" || text == "host") return Device::Host;
  if (text == "cuda" || text == "gpu") return Device::Cuda;
  throw UsageError("unknown device '" + text + "': use cpu or cuda");
}

}  // namespace tenax
