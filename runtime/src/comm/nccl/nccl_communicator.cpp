// The NCCL backend of Communicator (device buffers, one CUDA stream per communicator).
//
// Communicators are created non-blocking (config.blocking = 0) so that no NCCL call can hang the caller: every call
// that reports ncclInProgress is completed by polling ncclCommGetAsyncError under a deadline, and synchronize() polls
// the stream and the communicator's asynchronous error together. Every communicator is registered with the process's
// failure watchdog (core/failure_watchdog.hpp), whose thread polls each one's asynchronous error and oldest unfinished
// operation: on the first error or timeout, on any communicator, EVERY communicator of the process is aborted with
// ncclCommAbort (which also releases the GPU work stuck on them), so a rank whose tp peer died does not keep spinning
// on its dp group. The caller gets CommError / TimeoutError naming the group and the operation.
//
// Aborting from the watchdog thread while the training thread uses the communicator: every NCCL call on it happens
// under a shared lock, the abort under the exclusive one, and a call finds the communicator aborted (CommError) rather
// than freed. The lock is never held across a wait (non-blocking communicators return at once).
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <utility>

#include "comm/comm_state.hpp"
#include "core/check_cuda.hpp"
#include "core/check_nccl.hpp"
#include "core/failure_watchdog.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"

namespace tenax {
namespace {

using clock = std::chrono::steady_clock;

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32:
      return ncclFloat32;
    case DType::F64:
      return ncclFloat64;
    case DType::BF16:
      return ncclBfloat16;
    case DType::F16:
      return ncclFloat16;
    case DType::I32:
      return ncclInt32;
    case DType::I64:
      return ncclInt64;
    case DType::U8:
      return ncclUint8;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
    case ReduceOp::Avg:
      return ncclAvg;
  }
  return ncclSum;
}

// Polls until the communicator leaves ncclInProgress. Returns its final state, or ncclInProgress on timeout.
ncclResult_t wait_not_in_progress(ncclComm_t comm, std::chrono::milliseconds timeout) {
  const bool bounded = timeout.count() > 0;
  const clock::time_point deadline = clock::now() + timeout;
  for (unsigned spin = 0;; ++spin) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
    if (rc != ncclSuccess) return rc;
    if (state != ncclInProgress) return state;
    if (bounded && clock::now() > deadline) return ncclInProgress;
    if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

class NcclCommunicator final : public Communicator, public detail::Watched {
 public:
  // Takes `comm` over: on a failure here it is aborted before the exception leaves.
  NcclCommunicator(ncclComm_t comm, int device, std::string name)
      : comm_(comm), device_(device), name_(std::move(name)) {
    try {
      TENAX_CHECK_NCCL(ncclCommCount(comm_, &size_));
      TENAX_CHECK_NCCL(ncclCommUserRank(comm_, &rank_));
      TENAX_CHECK_CUDA(cudaSetDevice(device_));
      TENAX_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      TENAX_CHECK_CUDA(cudaMalloc(&barrier_word_, sizeof(int)));
    } catch (...) {
      ncclCommAbort(comm_);
      if (stream_ != nullptr) cudaStreamDestroy(stream_);
      throw;
    }
    detail::FailureWatchdog::instance().add(this);
  }

  ~NcclCommunicator() override {
    detail::FailureWatchdog::instance().remove(this);
    cudaSetDevice(device_);
    if (!aborted_) {
      // Finalize flushes outstanding work; bounded so that a broken peer cannot hang the destructor.
      const ncclResult_t rc = ncclCommFinalize(comm_);
      if ((rc != ncclSuccess && rc != ncclInProgress) ||
          wait_not_in_progress(comm_, detail::comm_timeout()) != ncclSuccess)
        abort();
    }
    // An aborted communicator was freed by ncclCommAbort already: destroy (or abort) it exactly once.
    if (!released_) ncclCommDestroy(comm_);
    released_ = true;
    pending_.clear();
    cudaFree(barrier_word_);
    cudaStreamDestroy(stream_);
  }

  // ---- detail::Watched (the watchdog thread) ----
  std::string watched_name() const override {
    return "group '" + name_ + "' (nccl, rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ")";
  }
  std::string async_error() override {
    std::shared_lock lock(use_);
    if (released_) return "";
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) return "";
    if (state == ncclSuccess || state == ncclInProgress) return "";
    return std::string(ncclGetErrorString(state)) + " (" + ncclGetLastError(comm_) + ")";
  }
  std::optional<clock::time_point> oldest_pending() override {
    std::lock_guard lock(pending_mutex_);
    cudaSetDevice(device_);
    while (!pending_.empty() && cudaEventQuery(pending_.front().first.get()) != cudaErrorNotReady)
      pending_.pop_front();
    if (pending_.empty()) return std::nullopt;
    return pending_.front().second;
  }
  void abort() override {
    std::unique_lock lock(use_);
    if (released_) return;
    // After an abort the handle is freed: nothing may call NCCL on it again (the destructor included).
    ncclCommAbort(comm_);
    released_ = true;
    aborted_ = true;
    detail::mark_communicator_aborted();
  }

  Backend backend() const override { return Backend::Nccl; }
  void barrier() override {
    all_reduce(barrier_word_, barrier_word_, 1, DType::I32, ReduceOp::Sum);
    synchronize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  std::uint64_t sequence() const override { return sequence_; }
  bool aborted() const override { return aborted_; }
  void* cuda_stream() const override { return stream_; }

  Work do_all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) override {
    return issue("all_reduce", count, dtype,
                 [&] { return ncclAllReduce(send, recv, count, nccl_type(dtype), nccl_op(op), comm_, stream_); });
  }
  Work do_all_gather(const void* send, void* recv, std::size_t count, DType dtype) override {
    return issue("all_gather", count, dtype,
                 [&] { return ncclAllGather(send, recv, count, nccl_type(dtype), comm_, stream_); });
  }
  Work do_reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) override {
    return issue("reduce_scatter", count, dtype,
                 [&] { return ncclReduceScatter(send, recv, count, nccl_type(dtype), nccl_op(op), comm_, stream_); });
  }
  Work do_broadcast(void* buffer, std::size_t count, DType dtype, int root) override {
    return issue("broadcast", count, dtype,
                 [&] { return ncclBroadcast(buffer, buffer, count, nccl_type(dtype), root, comm_, stream_); });
  }
  Work do_send(const void* buffer, std::size_t count, DType dtype, int peer) override {
    return issue("send", count, dtype, [&] { return ncclSend(buffer, count, nccl_type(dtype), peer, comm_, stream_); });
  }
  Work do_recv(void* buffer, std::size_t count, DType dtype, int peer) override {
    return issue("recv", count, dtype, [&] { return ncclRecv(buffer, count, nccl_type(dtype), peer, comm_, stream_); });
  }
  Work do_send_recv(const void* send_buffer, std::size_t send_count, int dst, void* recv_buffer, std::size_t recv_count,
                    int src, DType dtype) override {
    return issue("send_recv", send_count, dtype, [&] {
      ncclResult_t rc = ncclGroupStart();
      if (rc != ncclSuccess) return rc;
      rc = ncclSend(send_buffer, send_count, nccl_type(dtype), dst, comm_, stream_);
      const ncclResult_t rc2 = ncclRecv(recv_buffer, recv_count, nccl_type(dtype), src, comm_, stream_);
      const ncclResult_t end = ncclGroupEnd();
      if (rc != ncclSuccess && rc != ncclInProgress) return rc;
      if (rc2 != ncclSuccess && rc2 != ncclInProgress) return rc2;
      return end;
    });
  }
  Work do_exchange(const std::vector<PeerTransfer>& transfers, DType dtype) override {
    std::size_t largest = 0;
    for (const PeerTransfer& t : transfers)
      largest = std::max(largest, t.count);
    return issue("exchange", largest, dtype, [&] {
      ncclResult_t rc = ncclGroupStart();
      if (rc != ncclSuccess) return rc;
      for (const PeerTransfer& t : transfers) {
        const ncclResult_t r = t.send ? ncclSend(t.buffer, t.count, nccl_type(dtype), t.peer, comm_, stream_)
                                      : ncclRecv(t.buffer, t.count, nccl_type(dtype), t.peer, comm_, stream_);
        if (r != ncclSuccess && r != ncclInProgress && rc == ncclSuccess) rc = r;
      }
      const ncclResult_t end = ncclGroupEnd();
      return rc != ncclSuccess ? rc : end;
    });
  }
  void synchronize() override {
    check_alive("synchronize");
    TENAX_CHECK_CUDA(cudaSetDevice(device_));
    const std::chrono::milliseconds timeout = detail::comm_timeout();
    const bool bounded = timeout.count() > 0;
    const clock::time_point deadline = clock::now() + timeout;
    const std::string what =
        "synchronize on group '" + name_ + "' (nccl, operations up to #" + std::to_string(sequence_) + ")";
    for (unsigned spin = 0;; ++spin) {
      const cudaError_t done = cudaStreamQuery(stream_);
      if (done == cudaSuccess) return;
      if (done != cudaErrorNotReady) fail(what + ": CUDA reported " + cudaGetErrorString(done));
      const std::string error = async_error();
      if (!error.empty()) fail(what + ": NCCL reported " + error + "; a peer failed");
      if (aborted_)
        throw CommError(what + ": the communicator was aborted (another communicator of this process failed)");
      if (bounded && clock::now() > deadline) {
        detail::FailureWatchdog::instance().abort_all(what + " did not complete within TENAX_COMM_TIMEOUT");
        throw TimeoutError(what +
                           " did not complete within TENAX_COMM_TIMEOUT: a peer is dead or stuck; every "
                           "communicator was aborted");
      }
      if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  std::unique_ptr<Communicator> split(int color, int key, std::string name) override {
    check_alive("split");
    detail::count_operation();
    ++sequence_;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t child = nullptr;
    const ncclResult_t rc = ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, &config);
    if (rc != ncclSuccess && rc != ncclInProgress) fail_with(rc, "split", 0, DType::U8);
    settle("split", 0, DType::U8);
    if (child == nullptr) return nullptr;
    const ncclResult_t state = wait_not_in_progress(child, env::get_duration("TENAX_NCCL_INIT_TIMEOUT"));
    if (state != ncclSuccess) {
      ncclCommAbort(child);
      throw CommError("split of group '" + name_ + "' into '" + name + "' failed: " + ncclGetErrorString(state));
    }
    return std::make_unique<NcclCommunicator>(child, device_, std::move(name));  // aborts `child` if it throws
  }

 private:
  void check_alive(std::string_view op) const {
    if (aborted_)
      throw CommError(std::string(op) + " on group '" + name_ +
                      "': the communicator was aborted after an earlier failure; the run must restart");
  }
  // A failure on this communicator: every communicator of the process is aborted (this one included), then CommError.
  [[noreturn]] void fail(const std::string& why) {
    detail::FailureWatchdog::instance().abort_all(why);
    throw CommError(why + "; every communicator of this process was aborted");
  }
  [[noreturn]] void fail_with(ncclResult_t rc, std::string_view op, std::size_t count, DType dtype) {
    std::string last;
    {
      std::shared_lock lock(use_);
      if (!released_) last = ncclGetLastError(comm_);  // read before the abort frees the communicator
    }
    fail(detail::describe_operation(*this, op, sequence_, count, dtype) + " failed: " + ncclGetErrorString(rc) + " (" +
         last + ")");
  }
  // After a call returned ncclInProgress: wait until the communicator accepts the next call.
  void settle(std::string_view op, std::size_t count, DType dtype) {
    const ncclResult_t state = poll_until_settled();
    if (state == ncclInProgress) {
      const std::string what = detail::describe_operation(*this, op, sequence_, count, dtype) +
                               " could not be enqueued within TENAX_COMM_TIMEOUT";
      detail::FailureWatchdog::instance().abort_all(what);
      throw TimeoutError(what + "; every communicator was aborted");
    }
    if (state != ncclSuccess) fail_with(state, op, count, dtype);
  }
  // wait_not_in_progress, taking the shared lock only around each poll (an abort may come in between).
  ncclResult_t poll_until_settled() {
    const std::chrono::milliseconds timeout = detail::comm_timeout();
    const clock::time_point deadline = clock::now() + timeout;
    for (unsigned spin = 0;; ++spin) {
      ncclResult_t state = ncclSuccess;
      {
        std::shared_lock lock(use_);
        if (released_) return ncclInvalidUsage;
        if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) return ncclInternalError;
      }
      if (state != ncclInProgress) return state;
      if (timeout.count() > 0 && clock::now() > deadline) return ncclInProgress;
      if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  // What an enqueued operation's handle polls: a CUDA event recorded after it on the communicator's stream, and the
  // communicator's asynchronous error state.
  // An event recorded after an operation, shared by its handle and the watchdog's list of unfinished operations.
  using Event = std::shared_ptr<std::remove_pointer_t<cudaEvent_t>>;
  class PendingEvent : public Work::Pending {
   public:
    PendingEvent(NcclCommunicator& comm, Event event, std::string what)
        : Pending(std::move(what)), comm_(comm), event_(std::move(event)) {}
    bool poll() override {
      cudaSetDevice(comm_.device_);
      const cudaError_t done = cudaEventQuery(event_.get());
      if (done == cudaSuccess) return true;
      if (done != cudaErrorNotReady) comm_.fail(what() + ": CUDA reported " + cudaGetErrorString(done));
      const std::string error = comm_.async_error();
      if (!error.empty()) comm_.fail(what() + ": NCCL reported " + error + "; a peer failed");
      if (comm_.aborted_)
        throw CommError(what() + ": the communicator was aborted (a communicator of this process failed)");
      return false;
    }
    void abandon() override { detail::FailureWatchdog::instance().abort_all(what() + " was given up"); }

   private:
    NcclCommunicator& comm_;
    Event event_;
  };

  template <class Call>
  Work issue(std::string_view op, std::size_t count, DType dtype, Call&& call) {
    check_alive(op);
    detail::count_operation();
    ++sequence_;
    TENAX_CHECK_CUDA(cudaSetDevice(device_));
    ncclResult_t rc;
    {
      std::shared_lock lock(use_);
      if (released_) throw CommError(std::string(op) + " on group '" + name_ + "': the communicator was aborted");
      rc = call();
    }
    if (rc == ncclInProgress)
      settle(op, count, dtype);
    else if (rc != ncclSuccess)
      fail_with(rc, op, count, dtype);
    cudaEvent_t raw = nullptr;
    TENAX_CHECK_CUDA(cudaEventCreateWithFlags(&raw, cudaEventDisableTiming));
    Event event(raw, [](cudaEvent_t e) { cudaEventDestroy(e); });
    TENAX_CHECK_CUDA(cudaEventRecord(raw, stream_));
    {
      std::lock_guard lock(pending_mutex_);
      pending_.emplace_back(event, clock::now());
    }
    return Work(std::make_shared<PendingEvent>(*this, std::move(event),
                                               detail::describe_operation(*this, op, sequence_, count, dtype)));
  }

  ncclComm_t comm_;
  int device_;
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  std::uint64_t sequence_ = 0;
  std::atomic<bool> aborted_{false};
  bool released_ = false;  // ncclCommAbort or ncclCommDestroy freed comm_ (guarded by use_)
  std::shared_mutex use_;  // shared: an NCCL call on comm_; exclusive: the abort
  cudaStream_t stream_ = nullptr;
  int* barrier_word_ = nullptr;
  std::mutex pending_mutex_;
  std::deque<std::pair<Event, clock::time_point>> pending_;  // unfinished operations, oldest first (the watchdog's)
};

}  // namespace

bool nccl_available() {
  return true;
}

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device, std::string name) {
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) TENAX_CHECK_NCCL(ncclGetUniqueId(&id));
  bootstrap.broadcast(&id, sizeof id, DType::U8, 0);
  TENAX_CHECK_CUDA(cudaSetDevice(device));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t rc = ncclCommInitRankConfig(&comm, bootstrap.size(), id, bootstrap.rank(), &config);
  if (rc != ncclSuccess && rc != ncclInProgress)
    throw CommError("ncclCommInitRankConfig for group '" + name + "' failed: " + ncclGetErrorString(rc) + " (" +
                    ncclGetLastError(nullptr) + ")");
  const ncclResult_t state = wait_not_in_progress(comm, env::get_duration("TENAX_NCCL_INIT_TIMEOUT"));
  if (state != ncclSuccess) {
    ncclCommAbort(comm);
    detail::mark_communicator_aborted();
    if (state == ncclInProgress)
      throw TimeoutError("NCCL initialisation of group '" + name +
                         "' did not finish within TENAX_NCCL_INIT_TIMEOUT: a rank did not join (is every rank "
                         "running, and can the nodes reach each other?)");
    throw CommError("NCCL initialisation of group '" + name + "' failed: " + ncclGetErrorString(state));
  }
  TENAX_LOG(Info, "comm") << "NCCL communicator '" << name << "' up on device " << device;
  return std::make_unique<NcclCommunicator>(comm, device, std::move(name));
}

}  // namespace tenax
