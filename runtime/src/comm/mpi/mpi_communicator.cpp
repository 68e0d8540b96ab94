#include "comm/mpi/mpi_communicator.hpp"

#include <algorithm>

#include <climits>
#include <cstring>
#include <utility>

#include "comm/comm_state.hpp"
#include "core/check_mpi.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/kernels/cast.hpp"
#include "tenax/log.hpp"

namespace tenax::detail {
namespace {

bool is_half(DType t) {
  return t == DType::BF16 || t == DType::F16;
}

// The MPI type that moves (not reduces) elements of t: 16-bit floats travel as their bits.
MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32:
      return MPI_FLOAT;
    case DType::F64:
      return MPI_DOUBLE;
    case DType::BF16:
    case DType::F16:
      return MPI_UINT16_T;
    case DType::I32:
      return MPI_INT32_T;
    case DType::I64:
      return MPI_INT64_T;
    case DType::U8:
      return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

// Avg is a sum followed by a division (as in NCCL); MPI has no average.
MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return MPI_SUM;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
  }
  return MPI_OP_NULL;
}

int mpi_count(std::size_t count, std::string_view op) {
  if (count > static_cast<std::size_t>(INT_MAX))
    throw UsageError(std::string(op) + ": " + std::to_string(count) + " elements exceed the MPI limit of " +
                     std::to_string(INT_MAX) + " per operation; split the buffer into smaller operations");
  return static_cast<int>(count);
}

template <class T>
void divide_in_place(T* data, std::size_t n, int divisor) {
  for (std::size_t i = 0; i < n; ++i)
    data[i] = static_cast<T>(data[i] / static_cast<T>(divisor));
}

void divide_by(void* data, std::size_t n, DType dtype, int divisor) {
  switch (dtype) {
    case DType::F32:
      return divide_in_place(static_cast<float*>(data), n, divisor);
    case DType::F64:
      return divide_in_place(static_cast<double*>(data), n, divisor);
    case DType::I32:
      return divide_in_place(static_cast<std::int32_t*>(data), n, divisor);
    case DType::I64:
      return divide_in_place(static_cast<std::int64_t*>(data), n, divisor);
    case DType::U8:
      return divide_in_place(static_cast<std::uint8_t*>(data), n, divisor);
    case DType::BF16:
    case DType::F16:
      break;  // reduced in fp32 scratch, divided there
  }
}

const char* byte_ptr(const void* p) {
  return static_cast<const char*>(p);
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name) : comm_(comm), name_(std::move(name)) {
  TENAX_CHECK_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  TENAX_CHECK_MPI(MPI_Comm_rank(comm_, &rank_));
  TENAX_CHECK_MPI(MPI_Comm_size(comm_, &size_));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // An aborted communicator may still have an operation in flight that can never complete: freeing it could block.
  if (!finalized && !aborted_ && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::fail() {
  aborted_ = true;
  mark_communicator_aborted();
}

void MpiCommunicator::refuse_if_aborted(const char* op) const {
  if (aborted_)
    throw CommError(std::string(op) + " on group '" + name_ +
                    "': the communicator was aborted after an earlier failure (see the first error in the log); "
                    "the run must restart");
}

template <class Call>
void MpiCommunicator::run(const char* op, std::size_t count, DType dtype, Call&& call) {
  refuse_if_aborted(op);
  count_operation();
  const std::uint64_t sequence = ++sequence_;
  int rc = MPI_SUCCESS;
  {
    WatchedOperation watched(slot_, op, sequence, count, dtype);
    rc = call();
  }
  if (rc != MPI_SUCCESS) {
    fail();
    throw CommError(describe_operation(*this, op, sequence, count, dtype) + " failed: " + mpi_error_text(rc));
  }
}

Work MpiCommunicator::do_all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
  const int n = mpi_count(count, "all_reduce");
  if (is_half(dtype)) {
    scratch_in_.resize(count);
    kernels::cast_to_f32(send, dtype, scratch_in_.data(), count);
    run("all_reduce", count, dtype,
        [&] { return MPI_Allreduce(MPI_IN_PLACE, scratch_in_.data(), n, MPI_FLOAT, mpi_op(op), comm_); });
    if (op == ReduceOp::Avg) divide_in_place(scratch_in_.data(), count, size_);
    kernels::cast_from_f32(scratch_in_.data(), recv, dtype, count);
    return {};
  }
  const void* source = send == recv ? MPI_IN_PLACE : send;
  run("all_reduce", count, dtype, [&] { return MPI_Allreduce(source, recv, n, mpi_type(dtype), mpi_op(op), comm_); });
  if (op == ReduceOp::Avg) divide_by(recv, count, dtype, size_);
  return {};
}

Work MpiCommunicator::do_all_gather(const void* send, void* recv, std::size_t count, DType dtype) {
  const int n = mpi_count(count, "all_gather");
  mpi_count(count * static_cast<std::size_t>(size_), "all_gather");
  const std::size_t block = count * dtype_size(dtype);
  const void* source = byte_ptr(send) == byte_ptr(recv) + block * static_cast<std::size_t>(rank_) ? MPI_IN_PLACE : send;
  run("all_gather", count, dtype,
      [&] { return MPI_Allgather(source, n, mpi_type(dtype), recv, n, mpi_type(dtype), comm_); });
  return {};
}

Work MpiCommunicator::do_reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
  const int n = mpi_count(count, "reduce_scatter");
  const std::size_t total = count * static_cast<std::size_t>(size_);
  mpi_count(total, "reduce_scatter");
  const std::size_t esize = dtype_size(dtype);
  const char* s = byte_ptr(send);
  const char* r = byte_ptr(recv);
  if (count > 0 && r < s + total * esize && s < r + count * esize)
    throw UsageError("reduce_scatter on group '" + name_ +
                     "': the send and receive buffers overlap; use separate buffers");
  if (is_half(dtype)) {
    scratch_in_.resize(total);
    scratch_out_.resize(count);
    kernels::cast_to_f32(send, dtype, scratch_in_.data(), total);
    run("reduce_scatter", count, dtype, [&] {
      return MPI_Reduce_scatter_block(scratch_in_.data(), scratch_out_.data(), n, MPI_FLOAT, mpi_op(op), comm_);
    });
    if (op == ReduceOp::Avg) divide_in_place(scratch_out_.data(), count, size_);
    kernels::cast_from_f32(scratch_out_.data(), recv, dtype, count);
    return {};
  }
  run("reduce_scatter", count, dtype,
      [&] { return MPI_Reduce_scatter_block(send, recv, n, mpi_type(dtype), mpi_op(op), comm_); });
  if (op == ReduceOp::Avg) divide_by(recv, count, dtype, size_);
  return {};
}

Work MpiCommunicator::do_broadcast(void* buffer, std::size_t count, DType dtype, int root) {
  const int n = mpi_count(count, "broadcast");
  run("broadcast", count, dtype, [&] { return MPI_Bcast(buffer, n, mpi_type(dtype), root, comm_); });
  return {};
}

// Point-to-point messages use one tag: MPI keeps messages between a pair in order, which is all tenax relies on.
constexpr int kTag = 7;

Work MpiCommunicator::do_send(const void* buffer, std::size_t count, DType dtype, int peer) {
  const int n = mpi_count(count, "send");
  run("send", count, dtype, [&] { return MPI_Send(buffer, n, mpi_type(dtype), peer, kTag, comm_); });
  return {};
}

Work MpiCommunicator::do_recv(void* buffer, std::size_t count, DType dtype, int peer) {
  const int n = mpi_count(count, "recv");
  run("recv", count, dtype, [&] { return MPI_Recv(buffer, n, mpi_type(dtype), peer, kTag, comm_, MPI_STATUS_IGNORE); });
  return {};
}

Work MpiCommunicator::do_send_recv(const void* send_buffer, std::size_t send_count, int dst, void* recv_buffer,
                                   std::size_t recv_count, int src, DType dtype) {
  const int ns = mpi_count(send_count, "send_recv");
  const int nr = mpi_count(recv_count, "send_recv");
  run("send_recv", send_count, dtype, [&] {
    return MPI_Sendrecv(send_buffer, ns, mpi_type(dtype), dst, kTag, recv_buffer, nr, mpi_type(dtype), src, kTag, comm_,
                        MPI_STATUS_IGNORE);
  });
  return {};
}

// The requests of a nonblocking exchange, polled by its handle.
class MpiCommunicator::PendingRequests : public Work::Pending {
 public:
  PendingRequests(MpiCommunicator& comm, std::vector<MPI_Request> requests, std::string what)
      : Pending(std::move(what)), comm_(comm), requests_(std::move(requests)) {}
  bool poll() override {
    int done = 0;
    const int rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      comm_.fail();
      throw CommError(what() + " failed: " + mpi_error_text(rc));
    }
    return done != 0;
  }
  void abandon() override {
    for (MPI_Request& r : requests_)
      if (r != MPI_REQUEST_NULL) {
        MPI_Cancel(&r);
        MPI_Request_free(&r);
      }
    comm_.fail();
  }

 private:
  MpiCommunicator& comm_;
  std::vector<MPI_Request> requests_;
};

// A nonblocking collective, polled by its handle. Unlike point-to-point requests it cannot be cancelled (MPI forbids
// it): a handle given up marks the communicator aborted and leaves the request to the process.
class MpiCommunicator::PendingCollective : public Work::Pending {
 public:
  PendingCollective(MpiCommunicator& comm, MPI_Request request, std::string what)
      : Pending(std::move(what)), comm_(comm), request_(request) {}
  bool poll() override {
    int done = 0;
    const int rc = MPI_Test(&request_, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      comm_.fail();
      throw CommError(what() + " failed: " + mpi_error_text(rc));
    }
    return done != 0;
  }
  void abandon() override { comm_.fail(); }

 private:
  MpiCommunicator& comm_;
  MPI_Request request_;
};

Work MpiCommunicator::do_start_all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
  refuse_if_aborted("start_all_reduce");
  const int n = mpi_count(count, "start_all_reduce");
  count_operation();
  const std::uint64_t sequence = ++sequence_;
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc =
      MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, n, mpi_type(dtype), mpi_op(op), comm_, &request);
  const std::string what = describe_operation(*this, "start_all_reduce", sequence, count, dtype);
  if (rc != MPI_SUCCESS) {
    fail();
    throw CommError(what + " failed: " + mpi_error_text(rc));
  }
  return Work(std::make_shared<PendingCollective>(*this, request, what));
}

Work MpiCommunicator::do_exchange(const std::vector<PeerTransfer>& transfers, DType dtype) {
  std::size_t largest = 0;
  for (const PeerTransfer& t : transfers) {
    mpi_count(t.count, "exchange");
    largest = std::max(largest, t.count);
  }
  refuse_if_aborted("exchange");
  count_operation();
  const std::uint64_t sequence = ++sequence_;
  std::vector<MPI_Request> requests(transfers.size(), MPI_REQUEST_NULL);
  for (std::size_t i = 0; i < transfers.size(); ++i) {
    const PeerTransfer& t = transfers[i];
    const int n = static_cast<int>(t.count);
    const int rc = t.send ? MPI_Isend(t.buffer, n, mpi_type(dtype), t.peer, kTag, comm_, &requests[i])
                          : MPI_Irecv(t.buffer, n, mpi_type(dtype), t.peer, kTag, comm_, &requests[i]);
    if (rc != MPI_SUCCESS) {
      fail();
      throw CommError(describe_operation(*this, "exchange", sequence, largest, dtype) +
                      " failed: " + mpi_error_text(rc));
    }
  }
  return Work(std::make_shared<PendingRequests>(*this, std::move(requests),
                                                describe_operation(*this, "exchange", sequence, largest, dtype)));
}

void MpiCommunicator::barrier() {
  run("barrier", 0, DType::U8, [&] { return MPI_Barrier(comm_); });
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key, std::string name) {
  MPI_Comm child = MPI_COMM_NULL;
  run("split", 0, DType::I32, [&] { return MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &child); });
  if (child == MPI_COMM_NULL) return nullptr;
  TENAX_LOG(Debug, "comm") << "split '" << name_ << "' -> '" << name << "'";
  return std::make_unique<MpiCommunicator>(child, std::move(name));
}

}  // namespace tenax::detail

namespace tenax {

namespace {

// The rank the Slurm plugin assigned after topology-aware placement, when it applies to this MPI world: TENAX_RANK is
// set and TENAX_WORLD_SIZE matches the world (a variable inherited from an enclosing step of another size does not).
int placed_rank(int mpi_rank, int mpi_size) {
  if (!env::is_set("TENAX_RANK") || !env::is_set("TENAX_WORLD_SIZE")) return mpi_rank;
  if (env::get_int("TENAX_WORLD_SIZE") != mpi_size) {
    TENAX_LOG(Debug, "comm") << "ignoring TENAX_RANK: TENAX_WORLD_SIZE=" << env::get_int("TENAX_WORLD_SIZE")
                             << " is not this job's " << mpi_size << " ranks";
    return mpi_rank;
  }
  return static_cast<int>(env::get_int("TENAX_RANK"));
}

}  // namespace

std::unique_ptr<Communicator> make_mpi_world() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    throw UsageError(std::string("make_mpi_world: MPI is ") + (finalized ? "already finalised" : "not initialised") +
                     "; create the tenax::Runtime first (it starts MPI) and keep it for the whole program");
  // A separate communicator, so tenax's traffic never matches messages of an application that also uses
  // MPI_COMM_WORLD; ordered by the placed rank when the Slurm plugin computed one. The start-up exchange runs on a
  // duplicate with MPI_ERRORS_RETURN: MPI_COMM_WORLD's error handler is the program's, and tenax leaves it alone.
  MPI_Comm startup = MPI_COMM_NULL;
  TENAX_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &startup));
  struct FreeStartup {
    MPI_Comm& comm;
    ~FreeStartup() { MPI_Comm_free(&comm); }
  } free_startup{startup};
  TENAX_CHECK_MPI(MPI_Comm_set_errhandler(startup, MPI_ERRORS_RETURN));
  int mpi_rank = 0, mpi_size = 1;
  TENAX_CHECK_MPI(MPI_Comm_rank(startup, &mpi_rank));
  TENAX_CHECK_MPI(MPI_Comm_size(startup, &mpi_size));
  const int wanted = placed_rank(mpi_rank, mpi_size);
  std::vector<int> all(mpi_size);
  TENAX_CHECK_MPI(MPI_Allgather(&wanted, 1, MPI_INT, all.data(), 1, MPI_INT, startup));
  std::vector<int> seen(mpi_size, 0);
  for (int r : all) {
    if (r < 0 || r >= mpi_size || seen[r]++)
      throw UsageError("TENAX_RANK values of the " + std::to_string(mpi_size) + " ranks are not a permutation of 0.." +
                       std::to_string(mpi_size - 1) + " (rank " + std::to_string(r) +
                       " is out of range or given twice); unset TENAX_RANK, or "
                       "start the job through the tenax Slurm plugin so that every task gets its own");
  }
  MPI_Comm world = MPI_COMM_NULL;
  TENAX_CHECK_MPI(MPI_Comm_split(startup, 0, wanted, &world));
  if (wanted != mpi_rank) TENAX_LOG(Info, "comm") << "MPI rank " << mpi_rank << " runs as placed rank " << wanted;
  return std::make_unique<detail::MpiCommunicator>(world, "world");
}

}  // namespace tenax
