#include <atomic>
#include <string>

#include "comm/comm_state.hpp"
#include "tenax/communicator.hpp"
#include "tenax/env.hpp"

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
