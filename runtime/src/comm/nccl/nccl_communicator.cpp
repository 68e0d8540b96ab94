// The NCCL backend of Communicator (device buffers, one CUDA stream per communicator).
//
// Communicators are created non-blocking (config.blocking = 0) so that no NCCL call can hang the caller: every call
// that reports ncclInProgress is completed by polling ncclCommGetAsyncError under a deadline, and synchronize() polls
// the stream and the communicator's asynchronous error together. A peer that dies mid-collective therefore surfaces as
// an async error or a timeout; either way the communicator is aborted with ncclCommAbort (which also releases the
// GPU work stuck on it) and the caller gets CommError / TimeoutError naming the group and the operation.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "comm/comm_state.hpp"
#include "core/check_cuda.hpp"
#include "core/check_nccl.hpp"
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

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int device, std::string name)
      : comm_(comm), device_(device), name_(std::move(name)) {
    TENAX_CHECK_NCCL(ncclCommCount(comm_, &size_));
    TENAX_CHECK_NCCL(ncclCommUserRank(comm_, &rank_));
    TENAX_CHECK_CUDA(cudaSetDevice(device_));
    TENAX_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TENAX_CHECK_CUDA(cudaMalloc(&barrier_word_, sizeof(int)));
  }

  ~NcclCommunicator() override {
    cudaSetDevice(device_);
    if (!aborted_) {
      // Finalize flushes outstanding work; bounded so that a broken peer cannot hang the destructor.
      const ncclResult_t rc = ncclCommFinalize(comm_);
      if ((rc != ncclSuccess && rc != ncclInProgress) ||
          wait_not_in_progress(comm_, detail::comm_timeout()) != ncclSuccess)
        aborted_ = true;
    }
    if (aborted_) {
      ncclCommAbort(comm_);
    } else {
      ncclCommDestroy(comm_);
    }
    cudaFree(barrier_word_);
    cudaStreamDestroy(stream_);
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
    for (unsigned spin = 0;; ++spin) {
      const cudaError_t done = cudaStreamQuery(stream_);
      if (done == cudaSuccess) return;
      if (done != cudaErrorNotReady) {
        fail();
        detail::throw_call_error<CommError>("CUDA", "cudaStreamQuery(stream)", __FILE__, __LINE__,
                                            "group '" + name_ + "': " + cudaGetErrorString(done));
      }
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        fail();
        throw CommError("synchronize on group '" + name_ + "' (nccl, operations up to #" + std::to_string(sequence_) +
                        "): NCCL reported " + ncclGetErrorString(state) + " (" + ncclGetLastError(comm_) +
                        "); a peer failed; the communicator was aborted");
      }
      if (bounded && clock::now() > deadline) {
        fail();
        throw TimeoutError("synchronize on group '" + name_ + "' (nccl, operations up to #" +
                           std::to_string(sequence_) +
                           ") did not complete within TENAX_COMM_TIMEOUT: a peer is dead or stuck; the communicator "
                           "was aborted");
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
    return std::make_unique<NcclCommunicator>(child, device_, std::move(name));
  }

 private:
  void check_alive(std::string_view op) const {
    if (aborted_)
      throw CommError(std::string(op) + " on group '" + name_ +
                      "': the communicator was aborted after an earlier failure; the run must restart");
  }
  void fail() {
    if (!aborted_) ncclCommAbort(comm_);
    aborted_ = true;
    detail::mark_communicator_aborted();
  }
  [[noreturn]] void fail_with(ncclResult_t rc, std::string_view op, std::size_t count, DType dtype) {
    const std::string last = ncclGetLastError(comm_);
    fail();
    throw CommError(detail::describe_operation(*this, op, sequence_, count, dtype) +
                    " failed: " + ncclGetErrorString(rc) + " (" + last + ")");
  }
  // After a call returned ncclInProgress: wait until the communicator accepts the next call.
  void settle(std::string_view op, std::size_t count, DType dtype) {
    const ncclResult_t state = wait_not_in_progress(comm_, detail::comm_timeout());
    if (state == ncclInProgress) {
      fail();
      throw TimeoutError(detail::describe_operation(*this, op, sequence_, count, dtype) +
                         " could not be enqueued within TENAX_COMM_TIMEOUT; the communicator was aborted");
    }
    if (state != ncclSuccess) fail_with(state, op, count, dtype);
  }
  // What an enqueued operation's handle polls: a CUDA event recorded after it on the communicator's stream, and the
  // communicator's asynchronous error state.
  class PendingEvent : public Work::Pending {
   public:
    PendingEvent(NcclCommunicator& comm, cudaEvent_t event, std::string what)
        : Pending(std::move(what)), comm_(comm), event_(event) {}
    ~PendingEvent() override { cudaEventDestroy(event_); }
    bool poll() override {
      cudaSetDevice(comm_.device_);
      const cudaError_t done = cudaEventQuery(event_);
      if (done == cudaSuccess) return true;
      if (done != cudaErrorNotReady) {
        comm_.fail();
        throw CommError(what() + ": CUDA reported " + cudaGetErrorString(done) + "; the communicator was aborted");
      }
      ncclResult_t state = ncclSuccess;
      if (!comm_.aborted_) ncclCommGetAsyncError(comm_.comm_, &state);
      if (comm_.aborted_ || (state != ncclSuccess && state != ncclInProgress)) {
        comm_.fail();
        throw CommError(what() + ": NCCL reported " + ncclGetErrorString(state) +
                        "; a peer failed; the communicator was aborted");
      }
      return false;
    }
    void abandon() override { comm_.fail(); }

   private:
    NcclCommunicator& comm_;
    cudaEvent_t event_;
  };

  template <class Call>
  Work issue(std::string_view op, std::size_t count, DType dtype, Call&& call) {
    check_alive(op);
    detail::count_operation();
    ++sequence_;
    TENAX_CHECK_CUDA(cudaSetDevice(device_));
    const ncclResult_t rc = call();
    if (rc == ncclInProgress)
      settle(op, count, dtype);
    else if (rc != ncclSuccess)
      fail_with(rc, op, count, dtype);
    cudaEvent_t event = nullptr;
    TENAX_CHECK_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    TENAX_CHECK_CUDA(cudaEventRecord(event, stream_));
    return Work(
        std::make_shared<PendingEvent>(*this, event, detail::describe_operation(*this, op, sequence_, count, dtype)));
  }

  ncclComm_t comm_;
  int device_;
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  std::uint64_t sequence_ = 0;
  bool aborted_ = false;
  cudaStream_t stream_ = nullptr;
  int* barrier_word_ = nullptr;
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
