#include "comm/agreement.hpp"

#include "tenax/agreement.hpp"

#include <algorithm>
#include <cstdint>

namespace tenax {

Outcome agree(Communicator& comm, const Outcome& local) {
  std::int32_t code = local.code;
  comm.all_reduce(&code, &code, 1, DType::I32, ReduceOp::Max);
  if (code == 0) return {};
  std::int32_t first = local.code == code ? comm.rank() : comm.size();
  comm.all_reduce(&first, &first, 1, DType::I32, ReduceOp::Min);
  std::string message = broadcast_string(comm, local.message, first);
  return Outcome{code, "rank " + std::to_string(first) + ": " + message};
}

void wait_on_every_rank(Communicator& comm, const std::function<bool(std::chrono::milliseconds)>& ready) {
  std::chrono::milliseconds round{1};
  bool mine = false;
  while (true) {
    if (!mine) mine = ready(round);
    if (every_rank(comm, mine)) return;
    round = std::min(round * 2, std::chrono::milliseconds(100));
  }
}

bool any_rank(Communicator& comm, bool local) {
  std::int32_t flag = local ? 1 : 0;
  comm.all_reduce(&flag, &flag, 1, DType::I32, ReduceOp::Max);
  return flag != 0;
}

bool every_rank(Communicator& comm, bool local) {
  std::int32_t flag = local ? 1 : 0;
  comm.all_reduce(&flag, &flag, 1, DType::I32, ReduceOp::Min);
  return flag != 0;
}

std::string broadcast_string(Communicator& comm, const std::string& text, int root) {
  std::uint64_t size = comm.rank() == root ? text.size() : 0;
  comm.broadcast(&size, 1, DType::I64, root);
  std::string out = comm.rank() == root ? text : std::string(size, '\0');
  if (size > 0) comm.broadcast(out.data(), size, DType::U8, root);
  return out;
}

namespace {

// Every rank's string length, on every rank.
std::vector<std::uint64_t> all_sizes(Communicator& comm, const std::string& mine) {
  const std::uint64_t my_size = mine.size();
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(comm.size()));
  comm.all_gather(&my_size, sizes.data(), 1, DType::I64);
  return sizes;
}

}  // namespace

std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine) {
  const int n = comm.size();
  const std::vector<std::uint64_t> sizes = all_sizes(comm, mine);
  std::uint64_t longest = std::max<std::uint64_t>(1, *std::max_element(sizes.begin(), sizes.end()));
  std::string padded = mine;
  padded.resize(longest, '\0');
  std::string all(longest * n, '\0');
  comm.all_gather(padded.data(), all.data(), longest, DType::U8);
  std::vector<std::string> out(n);
  for (int r = 0; r < n; ++r)
    out[r] = all.substr(r * longest, sizes[r]);
  return out;
}

std::vector<std::string> gather_strings(Communicator& comm, const std::string& mine) {
  const int n = comm.size();
  const std::uint64_t my_size = mine.size();
  const std::vector<std::uint64_t> sizes = all_sizes(comm, mine);
  if (comm.rank() != 0) {
    if (my_size > 0) comm.send(mine.data(), my_size, DType::U8, 0);
    return {};
  }
  std::vector<std::string> out(n);
  out[0] = mine;
  for (int r = 1; r < n; ++r) {
    out[r].resize(sizes[r]);
    if (sizes[r] > 0) comm.recv(out[r].data(), sizes[r], DType::U8, r);
  }
  return out;
}

DeferredAgreement::~DeferredAgreement() {
  if (!posted_) return;
  if (std::uncaught_exceptions() > 0 || comm_.aborted()) {
    static_cast<void>(flags_.release());  // the request may still write here; the job is ending anyway
    return;
  }
  try {
    work_.wait();
  } catch (const std::exception&) {
    static_cast<void>(flags_.release());
  }
}

void DeferredAgreement::post(std::initializer_list<bool> flags) {
  if (posted_) throw UsageError("DeferredAgreement::post: the previous agreement's answer() was not read");
  if (flags.size() > kMaxFlags)
    throw UsageError("DeferredAgreement::post: " + std::to_string(flags.size()) + " flags, at most " +
                     std::to_string(kMaxFlags));
  if (!flags_) flags_ = std::make_unique<Flags>();
  count_ = 0;
  for (bool f : flags)
    (*flags_)[count_++] = f ? 1 : 0;
  work_ = comm_.start_all_reduce(flags_->data(), flags_->data(), count_, DType::I32, ReduceOp::Min);
  posted_ = true;
}

std::vector<bool> DeferredAgreement::answer() {
  if (!posted_) throw UsageError("DeferredAgreement::answer: nothing was posted");
  posted_ = false;
  try {
    work_.wait();
  } catch (...) {
    // Given up (the communicator is now aborted), but MPI cannot cancel it: the buffer stays with the request.
    static_cast<void>(flags_.release());
    throw;
  }
  std::vector<bool> every(count_);
  for (std::size_t i = 0; i < count_; ++i)
    every[i] = (*flags_)[i] != 0;
  return every;
}

}  // namespace tenax

namespace tenax {

void run_on_every_rank(Communicator& comm, const std::function<void()>& local) {
  run_agreed(comm, local);
}

}  // namespace tenax
