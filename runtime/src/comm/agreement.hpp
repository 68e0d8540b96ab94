// Agreements over a communicator, used wherever the ranks must take the same branch (checkpoints, data staging, the
// engine's set-up and its stop flags): one place for the all-reduce of a flag, the gather of strings, and the
// agreement on an outcome, in which every rank learns the worst outcome and, when there is a failure, the message of
// the lowest rank that has it, so that every rank raises the same error.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "core/host_memory.hpp"
#include "tenax/communicator.hpp"
#include "tenax/error.hpp"

namespace tenax {

struct Outcome {
  int code = 0;         // 0 = fine; larger is worse (the meaning is the caller's)
  std::string message;  // why, when code != 0
};

// Collective. Returns the largest code of all ranks and the message of the lowest rank with that code, prefixed
// "rank <r>: ".
Outcome agree(Communicator& comm, const Outcome& local);

// Collective. Runs `local` on this rank, agrees on its outcome with every rank, and raises the same exception on every
// rank: UsageError when any rank raised one, else IoError when any rank raised anything. A check that only some
// ranks could fail (their own inputs, their own file system) must run inside this, or the ranks that pass would go
// on into a collective that the failing rank never joins.
template <class F>
void run_agreed(Communicator& comm, F local) {
  Outcome outcome;
  try {
    local();
  } catch (const UsageError& e) {
    outcome = Outcome{2, e.what()};
  } catch (const std::bad_alloc&) {
    // Memory outside the host memory accounting (core/host_memory.hpp) ran out: say so, not "std::bad_alloc".
    outcome = Outcome{1, detail::kOutOfHostMemory};
  } catch (const std::exception& e) {
    outcome = Outcome{1, e.what()};
  }
  Outcome all = agree(comm, outcome);
  if (all.code == 2) throw UsageError(all.message);
  if (all.code != 0) throw IoError(all.message);
}

// Collective. Returns once `ready(timeout)` has returned true on every rank; `ready` waits up to `timeout` for this
// rank's condition (e.g. its I/O thread's job) and says whether it holds. Instead of one blocking collective that
// the fast ranks would sit in while a slow rank finishes a large write (long enough for the communication watchdog,
// TENAX_COMM_TIMEOUT, to end healthy ranks), every rank joins one small all-reduce per round, rounds growing from
// 1 ms to 100 ms apart: no collective call lasts longer than a round.
void wait_on_every_rank(Communicator& comm, const std::function<bool(std::chrono::milliseconds)>& ready);

// Collective: true on every rank when `local` is true on at least one rank (a stop flag any rank may raise).
bool any_rank(Communicator& comm, bool local);
// Collective: true on every rank when `local` is true on every rank (a condition all must reach).
bool every_rank(Communicator& comm, bool local);

// Collective: rank 0 receives every rank's string (index = rank); other ranks receive an empty vector.
std::vector<std::string> gather_strings(Communicator& comm, const std::string& mine);

// Collective: every rank receives every rank's string.
std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine);

// Collective: every rank returns root's `text`.
std::string broadcast_string(Communicator& comm, const std::string& text, int root);

// An every_rank() over a few flags whose answer is read one call later. post() starts a nonblocking MIN all-reduce and
// returns at once; answer() waits for it and says, per flag, whether it was set on every rank. Between the two a rank
// goes on with its step, whose own communication carries the all-reduce along, so answer() rarely waits where a
// blocking every_rank() would hold each rank until the last one arrived. Every rank calls post() and answer() at the
// same points, like any collective; at most one is posted at a time. Destroying a posted one waits for it (bounded by
// TENAX_COMM_TIMEOUT), except while an exception unwinds or after the communicator failed: then the job is ending,
// and the flags' memory is left to MPI rather than freed under a request that may still write into it (the same
// after an answer() that timed out).
class DeferredAgreement {
 public:
  static constexpr std::size_t kMaxFlags = 8;
  using Flags = std::array<std::int32_t, kMaxFlags>;

  explicit DeferredAgreement(Communicator& comm) : comm_(comm), flags_(std::make_unique<Flags>()) {}
  ~DeferredAgreement();
  DeferredAgreement(const DeferredAgreement&) = delete;  // MPI holds the address of *flags_ while posted
  DeferredAgreement& operator=(const DeferredAgreement&) = delete;

  // Collective (nonblocking). UsageError when one is already posted or there are more than kMaxFlags flags.
  void post(std::initializer_list<bool> flags);
  bool posted() const { return posted_; }
  // Collective: waits for the posted all-reduce (TENAX_COMM_TIMEOUT: TimeoutError) and returns its answer, one entry
  // per posted flag. UsageError when nothing is posted.
  std::vector<bool> answer();

 private:
  Communicator& comm_;
  std::unique_ptr<Flags> flags_;  // null after a request was given up with it (leaked to MPI)
  std::size_t count_ = 0;
  bool posted_ = false;
  Work work_;
};

}  // namespace tenax
