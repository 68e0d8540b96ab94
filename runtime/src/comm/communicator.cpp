#include <atomic>
#include <string>
#include <thread>

#include "comm/comm_state.hpp"
#include "tenax/communicator.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"

namespace tenax {
namespace {
std::atomic<std::uint64_t> g_operations{0};
std::atomic<bool> g_aborted{false};
}  // namespace

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Avg:
      return "avg";
  }
  return "?";
}

std::string_view backend_name(Backend b) {
  return b == Backend::Mpi ? "mpi" : "nccl";
}

std::uint64_t operations_issued() {
  return g_operations.load(std::memory_order_relaxed);
}

// ---- Work ----

bool Work::is_completed() {
  if (!pending_) return true;
  if (!pending_->poll()) return false;
  pending_.reset();
  return true;
}

void Work::wait() {
  wait(detail::comm_timeout());
}

void Work::wait(std::chrono::milliseconds timeout) {
  if (!pending_) return;
  const auto start = std::chrono::steady_clock::now();
  for (unsigned spin = 0;; ++spin) {
    if (pending_->poll()) {
      pending_.reset();
      return;
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    if (timeout.count() > 0 && waited > timeout) {
      pending_->abandon();
      const std::string what = pending_->what();
      pending_.reset();
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%.1f", std::chrono::duration<double>(waited).count());
      throw TimeoutError(what + " did not complete within " + std::to_string(timeout.count()) + " ms (waited " +
                         seconds +
                         " s): a peer in this group is dead, stuck, or issued a different operation; the "
                         "communicator was aborted");
    }
    // Spin briefly (short operations), then yield the core between polls.
    if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// ---- The front end ----

void Communicator::refuse(std::string_view op, const std::string& why) const {
  throw UsageError(std::string(op) + " on group '" + name() + "' (rank " + std::to_string(rank()) + " of " +
                   std::to_string(size()) + "): " + why);
}

void Communicator::check_count(std::string_view op, std::size_t count, std::size_t factor, DType dtype) const {
  std::size_t elements = 0, bytes = 0;
  if (__builtin_mul_overflow(count, factor, &elements) || __builtin_mul_overflow(elements, dtype_size(dtype), &bytes))
    refuse(op, std::to_string(count) + " elements of " + std::string(dtype_name(dtype)) +
                   " are more bytes than memory can hold");
}

void Communicator::check_peer(std::string_view op, int peer, const char* role) const {
  if (peer < 0 || peer >= size())
    refuse(op, std::string(role) + " rank " + std::to_string(peer) + " is outside the group (size " +
                   std::to_string(size()) + ")");
}

namespace {
bool missing(const void* p, std::size_t count) {
  return p == nullptr && count > 0;
}
}  // namespace

Work Communicator::all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
  check_count("all_reduce", count, 1, dtype);
  if (missing(send, count) || missing(recv, count)) refuse("all_reduce", "a buffer is null");
  return do_all_reduce(send, recv, count, dtype, op);
}

Work Communicator::start_all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
  check_count("start_all_reduce", count, 1, dtype);
  if (missing(send, count) || missing(recv, count)) refuse("start_all_reduce", "a buffer is null");
  // Half types reduce through fp32 scratch and Avg divides afterwards: both need a step after the reduction, which a
  // handle that completes by itself has no place for.
  if (dtype == DType::BF16 || dtype == DType::F16)
    refuse("start_all_reduce", std::string(dtype_name(dtype)) + " is reduced through fp32: use all_reduce");
  if (op == ReduceOp::Avg) refuse("start_all_reduce", "Avg is not supported: reduce with Sum and divide");
  return do_start_all_reduce(send, recv, count, dtype, op);
}

Work Communicator::all_gather(const void* send, void* recv, std::size_t count, DType dtype) {
  check_count("all_gather", count, static_cast<std::size_t>(size()), dtype);
  if (missing(send, count) || missing(recv, count)) refuse("all_gather", "a buffer is null");
  // In place only at this rank's own block of the result.
  const auto* s = static_cast<const unsigned char*>(send);
  const auto* r = static_cast<const unsigned char*>(recv);
  const std::size_t block = count * dtype_size(dtype), total = block * static_cast<std::size_t>(size());
  const std::size_t own = block * static_cast<std::size_t>(rank());
  if (count > 0 && s + block > r && s < r + total && s != r + own)
    refuse("all_gather", "the send buffer overlaps the receive buffer other than at this rank's own block");
  return do_all_gather(send, recv, count, dtype);
}

Work Communicator::reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
  check_count("reduce_scatter", count, static_cast<std::size_t>(size()), dtype);
  if (missing(send, count) || missing(recv, count)) refuse("reduce_scatter", "a buffer is null");
  const auto* s = static_cast<const unsigned char*>(send);
  const auto* r = static_cast<const unsigned char*>(recv);
  const std::size_t total = count * dtype_size(dtype) * static_cast<std::size_t>(size());
  if (count > 0 && r < s + total && s < r + count * dtype_size(dtype))
    refuse("reduce_scatter", "the receive buffer overlaps the send buffer (use separate buffers)");
  return do_reduce_scatter(send, recv, count, dtype, op);
}

Work Communicator::broadcast(void* buffer, std::size_t count, DType dtype, int root) {
  check_peer("broadcast", root, "root");
  check_count("broadcast", count, 1, dtype);
  if (missing(buffer, count)) refuse("broadcast", "the buffer is null");
  return do_broadcast(buffer, count, dtype, root);
}

Work Communicator::send(const void* buffer, std::size_t count, DType dtype, int peer) {
  check_peer("send", peer, "peer");
  check_count("send", count, 1, dtype);
  if (missing(buffer, count)) refuse("send", "the buffer is null");
  return do_send(buffer, count, dtype, peer);
}

Work Communicator::recv(void* buffer, std::size_t count, DType dtype, int peer) {
  check_peer("recv", peer, "peer");
  check_count("recv", count, 1, dtype);
  if (missing(buffer, count)) refuse("recv", "the buffer is null");
  return do_recv(buffer, count, dtype, peer);
}

Work Communicator::send_recv(const void* send_buffer, std::size_t send_count, int dst, void* recv_buffer,
                             std::size_t recv_count, int src, DType dtype) {
  check_peer("send_recv", dst, "destination");
  check_peer("send_recv", src, "source");
  check_count("send_recv", send_count, 1, dtype);
  check_count("send_recv", recv_count, 1, dtype);
  if (missing(send_buffer, send_count) || missing(recv_buffer, recv_count)) refuse("send_recv", "a buffer is null");
  return do_send_recv(send_buffer, send_count, dst, recv_buffer, recv_count, src, dtype);
}

Work Communicator::exchange(const std::vector<PeerTransfer>& transfers, DType dtype) {
  for (const PeerTransfer& t : transfers) {
    check_peer("exchange", t.peer, t.send ? "destination" : "source");
    check_count("exchange", t.count, 1, dtype);
    if (missing(t.buffer, t.count)) refuse("exchange", "a buffer is null");
  }
  return do_exchange(transfers, dtype);
}

namespace detail {

void count_operation() {
  g_operations.fetch_add(1, std::memory_order_relaxed);
}
void mark_communicator_aborted() {
  g_aborted.store(true);
}
bool any_communicator_aborted() {
  return g_aborted.load();
}

std::chrono::milliseconds comm_timeout() {
  // Read once: the environment was validated at start-up and does not change during a run.
  static const std::chrono::milliseconds timeout = env::get_duration("TENAX_COMM_TIMEOUT");
  return timeout;
}

std::string describe_operation(const Communicator& comm, std::string_view op, std::uint64_t sequence, std::size_t count,
                               DType dtype) {
  std::string s(op);
  s += " on group '";
  s += comm.name();
  s += "' (";
  s += backend_name(comm.backend());
  s += ", rank ";
  s += std::to_string(comm.rank());
  s += " of ";
  s += std::to_string(comm.size());
  s += ", operation #";
  s += std::to_string(sequence);
  s += ", ";
  s += std::to_string(count);
  s += " x ";
  s += dtype_name(dtype);
  s += ")";
  return s;
}

}  // namespace detail
}  // namespace tenax
