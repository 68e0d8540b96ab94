// Communicator: the one interface every collective in tenax goes through, with two real backends.
//
//   MPI  (make_mpi_world)        host buffers; every operation but exchange and start_all_reduce completes before it
//                                returns.
//   NCCL (make_nccl_communicator) device buffers; operations are enqueued on the communicator's CUDA stream and return
//                                at once; synchronize() waits for them. Read results only after synchronize().
//
// Contract, as in MPI and NCCL: every rank of a communicator calls the same collectives in the same order with the same
// count, dtype, op and root. Operations on one communicator are issued from one thread at a time.
//
// Completion: every operation returns a handle (Work) that says when its result is valid; see below.
//
// Failure: every blocking operation honours TENAX_COMM_TIMEOUT. MPI: each operation is exactly the blocking MPI call
// it wraps, watched by a per-process watchdog; an operation still running after the timeout is logged (group,
// operation, sequence number, size, time waited) and the process ends with kExitPeerFailure (a stuck MPI call can
// neither be interrupted nor finalised around; tenax-launch restarts the job). NCCL: a timeout throws TimeoutError.
// Any backend error throws CommError naming the group and the operation; after it the communicator is aborted and
// every later call throws CommError at once. A dead peer therefore never becomes a silent hang.
//
// Buffers: count is in elements. In place: all_reduce with send == recv; all_gather with
// send == recv + rank*count; reduce_scatter with send == recv is not allowed (use separate buffers).
// bf16/f16 are reduced by converting to fp32, reducing, and rounding once (more accurate than reducing in 16 bits).
// Avg on integer types truncates toward zero, like NCCL's ncclAvg.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tenax/dtype.hpp"

namespace tenax {

enum class ReduceOp { Sum, Max, Min, Avg };
enum class Backend { Mpi, Nccl };

std::string_view reduce_op_name(ReduceOp op);
std::string_view backend_name(Backend b);

// One point-to-point transfer of an exchange (Communicator::exchange).
struct PeerTransfer {
  bool send = true;
  int peer = 0;
  void* buffer = nullptr;  // read by a send, written by a receive
  std::size_t count = 0;
};

// A completion handle: what every operation returns, the same on every backend. The operation's result (the receive
// buffer) is valid once is_completed() is true or wait() has returned. MPI collectives complete before they return
// (a completed handle); NCCL operations and MPI exchanges complete later. Dropping a handle does not wait:
// Communicator::synchronize() (NCCL) or the next operation's ordering still apply.
class Work {
 public:
  // Backend side of a handle that is not complete yet.
  class Pending {
   public:
    explicit Pending(std::string what) : what_(std::move(what)) {}
    virtual ~Pending() = default;
    // True once complete. Throws CommError when the operation failed (the communicator is then aborted).
    virtual bool poll() = 0;
    // The wait ran out: give the operation up (cancel it, abort the communicator) so that nothing waits on it.
    virtual void abandon() = 0;
    // "exchange on group 'pp[0,0]' (mpi, rank 1 of 2, operation #12, 1024 x bf16)"
    const std::string& what() const { return what_; }

   private:
    std::string what_;
  };

  Work() = default;  // completed
  explicit Work(std::shared_ptr<Pending> pending) : pending_(std::move(pending)) {}

  // Polls once; never blocks. Throws CommError when the operation failed.
  bool is_completed();
  // Waits until complete, at most TENAX_COMM_TIMEOUT (0 there: no limit).
  void wait();
  // Waits at most `timeout` (0: no limit). On expiry the operation is given up and TimeoutError names the group, the
  // operation and the time waited; a failure throws CommError.
  void wait(std::chrono::milliseconds timeout);

 private:
  std::shared_ptr<Pending> pending_;
};

// The collectives' front end: every call goes through the same argument checks on every backend (null buffers, a
// peer or root outside the group, overlapping buffers where they may not overlap, sizes that overflow), which throw
// UsageError naming the group and the operation before anything is issued; then the backend issues it.
class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual Backend backend() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The group's name as it appears in errors and logs, e.g. "world", "tp[1]", "dp[0]".
  virtual const std::string& name() const = 0;
  // Number of operations this rank has issued on this communicator (heartbeats compare these across ranks).
  virtual std::uint64_t sequence() const = 0;
  // True once an operation failed or timed out; every later operation throws.
  virtual bool aborted() const = 0;

  Work all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op);
  // all_reduce that returns at once (MPI: MPI_Iallreduce, host buffers; NCCL: its all_reduce, enqueued as always, so
  // device buffers): for small agreements a rank reads a step later, so that no rank waits for the others to arrive.
  // The handle completes when `recv` holds the result; until then neither buffer may be touched, read or freed, and a
  // handle dropped or given up unfinished leaves the operation running (MPI cannot cancel a collective). Same-order
  // rule as every collective. Integer and fp32/fp64 types; not Avg (UsageError).
  Work start_all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op);
  // recv holds size()*count elements, rank r's contribution at r*count.
  Work all_gather(const void* send, void* recv, std::size_t count, DType dtype);
  // send holds size()*count elements; recv gets this rank's count-element block of the reduction.
  Work reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op);
  Work broadcast(void* buffer, std::size_t count, DType dtype, int root);
  Work send(const void* buffer, std::size_t count, DType dtype, int peer);
  Work recv(void* buffer, std::size_t count, DType dtype, int peer);
  // Sends to dst and receives from src at the same time (never deadlocks on ordering).
  Work send_recv(const void* send_buffer, std::size_t send_count, int dst, void* recv_buffer, std::size_t recv_count,
                 int src, DType dtype);
  // Posts every transfer at once; the handle completes when all of them did (MPI: nonblocking sends and receives;
  // NCCL: one group). Between two ranks, transfers are matched in the order each side lists them, across calls too.
  // Used for the pipeline's batched exchanges with both neighbours, which cannot deadlock on the order of their halves.
  Work exchange(const std::vector<PeerTransfer>& transfers, DType dtype);
  virtual void barrier() = 0;
  // Waits until every operation issued so far has completed (NCCL); a no-op for MPI.
  virtual void synchronize() = 0;
  // The CUDA stream (a cudaStream_t) the operations are enqueued on, for ordering device work around them with events
  // (tenax/execution.hpp); null for host backends.
  virtual void* cuda_stream() const { return nullptr; }

  // Collective over this communicator: ranks with the same color form a new communicator, ordered by key.
  // color < 0: this rank joins no group and gets nullptr.
  virtual std::unique_ptr<Communicator> split(int color, int key, std::string name) = 0;

 protected:
  Communicator() = default;

  // The backends, called after the front end's checks.
  virtual Work do_all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) = 0;
  // Default: the ordinary all_reduce, for backends whose operations already return at once (NCCL enqueues them).
  virtual Work do_start_all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
    return do_all_reduce(send, recv, count, dtype, op);
  }
  virtual Work do_all_gather(const void* send, void* recv, std::size_t count, DType dtype) = 0;
  virtual Work do_reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) = 0;
  virtual Work do_broadcast(void* buffer, std::size_t count, DType dtype, int root) = 0;
  virtual Work do_send(const void* buffer, std::size_t count, DType dtype, int peer) = 0;
  virtual Work do_recv(void* buffer, std::size_t count, DType dtype, int peer) = 0;
  virtual Work do_send_recv(const void* send_buffer, std::size_t send_count, int dst, void* recv_buffer,
                            std::size_t recv_count, int src, DType dtype) = 0;
  virtual Work do_exchange(const std::vector<PeerTransfer>& transfers, DType dtype) = 0;

 private:
  [[noreturn]] void refuse(std::string_view op, const std::string& why) const;
  void check_count(std::string_view op, std::size_t count, std::size_t factor, DType dtype) const;
  void check_peer(std::string_view op, int peer, const char* role) const;
};

// The MPI communicator over MPI_COMM_WORLD. MPI must be initialised (tenax::Runtime does it).
std::unique_ptr<Communicator> make_mpi_world();

// True when this build has the NCCL backend.
bool nccl_available();

// An NCCL communicator over the same ranks as `bootstrap` (the unique id travels over it), on CUDA device `device`.
// Initialisation is non-blocking and bounded by TENAX_COMM_TIMEOUT. Throws UsageError in a build without NCCL.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device, std::string name = "world");

// Process-wide count of operations issued on all communicators (the heartbeat's "last collective" number).
std::uint64_t operations_issued();

}  // namespace tenax
