// The watchdog that turns a blocking MPI call stuck on a dead or hung peer into a failure naming the group and the
// operation.
//
// Why blocking calls and a watchdog rather than non-blocking calls polled under a deadline: Open MPI's non-blocking
// collectives use other algorithms than its blocking ones (libnbc instead of the tuned component) and advance only
// while the caller polls; measured here, they ran up to 4x slower than the blocking calls at 1–4 MiB (all-gather) and
// 12–25% slower at 16–256 MiB (all-reduce). The layer must add nothing to the collectives it wraps, so tenax issues
// exactly the blocking call and lets one thread per process watch the clock instead.
//
// A blocking MPI call cannot be interrupted, and the communicator is unusable after a timeout anyway, so when an
// operation outlives TENAX_COMM_TIMEOUT the watchdog logs the operation (group, rank, operation number, size, how long
// it waited) and ends the process with kExitPeerFailure; mpirun or srun then end the job, and tenax-launch restarts it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tenax/communicator.hpp"

namespace tenax::detail {

// What one communicator is doing right now. Written by the thread calling the communicator, read by the watchdog.
class OperationSlot {
 public:
  explicit OperationSlot(const Communicator& comm);
  ~OperationSlot();
  OperationSlot(const OperationSlot&) = delete;
  OperationSlot& operator=(const OperationSlot&) = delete;

  // Marks an operation as started / finished. `op` must be a string literal.
  void start(const char* op, std::uint64_t sequence, std::size_t count, DType dtype);
  void finish() { started_ns_.store(0, std::memory_order_release); }

 private:
  friend class Watchdog;
  const Communicator& comm_;
  // 0 when idle; otherwise the steady-clock time the operation started. The fields below are written before it.
  std::atomic<std::int64_t> started_ns_{0};
  std::atomic<const char*> op_{""};
  std::atomic<std::uint64_t> sequence_{0};
  std::atomic<std::size_t> count_{0};
  std::atomic<DType> dtype_{DType::U8};
};

// RAII: the operation is watched for the guard's lifetime.
class WatchedOperation {
 public:
  WatchedOperation(OperationSlot& slot, const char* op, std::uint64_t sequence, std::size_t count, DType dtype)
      : slot_(slot) {
    slot_.start(op, sequence, count, dtype);
  }
  ~WatchedOperation() { slot_.finish(); }
  WatchedOperation(const WatchedOperation&) = delete;
  WatchedOperation& operator=(const WatchedOperation&) = delete;

 private:
  OperationSlot& slot_;
};

}  // namespace tenax::detail
