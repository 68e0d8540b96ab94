// Restart-loop protection: what counts as progress between failed attempts.
//
// A restart resumes from the newest committed checkpoint, so an attempt made progress exactly when it left a newer
// committed checkpoint behind than any attempt before it. Steps completed after that checkpoint are thrown away by the
// next restart: counting them (the highest heartbeat step) let a program that crashes before every checkpoint loop
// until --max-restarts, and the heartbeat step lags the ranks by up to one heartbeat interval anyway. Without a
// checkpoint directory the launcher cannot see commits, and the highest heartbeat step is the only evidence left.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tenax::launch {

enum class ProgressBasis {
  Checkpoint,  // the newest committed checkpoint step (--checkpoint-dir given)
  Heartbeat,   // the highest step any heartbeat reported (no --checkpoint-dir)
};

// "checkpoint" / "heartbeat": the ledger's "progress_by" field.
const char* progress_basis_name(ProgressBasis basis);
// Inverse of progress_basis_name; nullopt for anything else.
std::optional<ProgressBasis> parse_progress_basis(std::string_view name);

// What one finished attempt left behind.
struct AttemptProgress {
  std::int64_t max_step = -1;        // highest step its heartbeats reported
  std::int64_t committed_step = -1;  // newest committed checkpoint after it (-1: none; 0: a fresh start)
};

// The restart-loop state at the moment of a decision, for the decision's message.
struct ProgressState {
  ProgressBasis basis = ProgressBasis::Heartbeat;
  int streak = 0;          // consecutive failed attempts, the last one included, without progress
  std::int64_t best = -1;  // the best step on `basis` so far
};

// Replays attempts in order (from the ledger, then live). Both bests are kept whatever the basis, so that an
// attempt judged on one basis compares with every earlier attempt, even one that was judged on the other.
class ProgressTracker {
 public:
  // Records one finished attempt, judged on `basis`; returns whether it made progress. A failed attempt without
  // progress extends the streak and one with progress ends it; a successful or preempted attempt ends it only when it
  // made progress (a preemption proves nothing about the cause of the failures before it).
  bool record(ProgressBasis basis, const AttemptProgress& attempt, bool failed);
  // The run was stopped on purpose (done, usage error, gave up): the next invocation starts a fresh streak.
  void reset_streak() { streak_ = 0; }
  // The newest checkpoint committed before this invocation's first attempt: checkpoints that were there already are
  // no attempt's progress (a run whose every checkpoint is damaged does not look like one that commits new ones).
  void start_from(std::int64_t committed) { best_committed_ = std::max(best_committed_, committed); }

  int streak() const { return streak_; }
  std::int64_t best_committed_step() const { return best_committed_; }
  std::int64_t best_max_step() const { return best_max_step_; }
  ProgressState state(ProgressBasis basis) const;

 private:
  int streak_ = 0;
  std::int64_t best_committed_ = -1;
  std::int64_t best_max_step_ = -1;
};

}  // namespace tenax::launch
