// A collective on memory of an execution context: the communicator reads the data only after the compute stream has
// written it, and the compute stream reads the result only after the communicator wrote it (events on a device; host
// collectives are synchronous anyway).
#pragma once

#include <cstddef>

#include "tenax/communicator.hpp"
#include "tenax/execution.hpp"

namespace tenax::detail {

inline void all_reduce_in_context(ExecutionContext& ctx, Communicator& comm, void* data, std::size_t count, DType dtype,
                                  ReduceOp op) {
  ctx.before_communication(comm);
  comm.all_reduce(data, data, count, dtype, op);
  ctx.after_communication(comm);
}

}  // namespace tenax::detail
