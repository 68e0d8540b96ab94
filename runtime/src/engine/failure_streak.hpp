// Checkpoint saves that failed in a row (CheckpointPolicy::max_failures). The engine's own: it calls failed() for each
// failure it learns of, and committed() after every step with the checkpointer's newest committed step.
#pragma once

#include <cstdint>
#include <optional>

namespace tenax {

class FailureStreak {
 public:
  // A failure learnt of at `step`; returns the failures in a row so far.
  int failed(long step) {
    learnt_at_ = step;
    return ++count_;
  }
  // Only a checkpoint taken at or after the step of the last failure proves the saves work again: a commit of an older
  // one (learnt of at the same call as the failure of a newer one, which is how a checkpointer reports them) does not
  // end the streak.
  void committed(std::optional<std::uint64_t> newest) {
    if (!newest || newest == seen_) return;
    seen_ = newest;
    if (static_cast<long>(*newest) >= learnt_at_) count_ = 0;
  }
  int count() const { return count_; }

 private:
  int count_ = 0;
  long learnt_at_ = -1;
  std::optional<std::uint64_t> seen_;
};

}  // namespace tenax
