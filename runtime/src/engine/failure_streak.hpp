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
  // The checkpointer's newest committed step, learnt of at `step`. A new commit learnt of at a later call than the
  // last failure proves the saves work again; one learnt of at the same call does not (a checkpointer reports the
  // commit of an older checkpoint together with the failure of the next one, which is how a commit older than the
  // failure can appear at all).
  void committed(std::optional<std::uint64_t> newest, long step) {
    if (!newest || newest == seen_) return;
    seen_ = newest;
    if (step > learnt_at_) count_ = 0;
  }
  int count() const { return count_; }

 private:
  int count_ = 0;
  long learnt_at_ = -1;
  std::optional<std::uint64_t> seen_;
};

}  // namespace tenax
