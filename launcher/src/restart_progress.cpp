#include "restart_progress.hpp"

#include <algorithm>

namespace tenax::launch {

const char* progress_basis_name(ProgressBasis basis) {
  return basis == ProgressBasis::Checkpoint ? "checkpoint" : "heartbeat";
}

std::optional<ProgressBasis> parse_progress_basis(std::string_view name) {
  if (name == "checkpoint") return ProgressBasis::Checkpoint;
  if (name == "heartbeat") return ProgressBasis::Heartbeat;
  return std::nullopt;
}

bool ProgressTracker::record(ProgressBasis basis, const AttemptProgress& attempt, bool failed) {
  const bool progressed =
      basis == ProgressBasis::Checkpoint ? attempt.committed_step > best_committed_ : attempt.max_step > best_max_step_;
  best_committed_ = std::max(best_committed_, attempt.committed_step);
  best_max_step_ = std::max(best_max_step_, attempt.max_step);
  if (failed) {
    streak_ = progressed ? 0 : streak_ + 1;
  } else if (progressed) {
    streak_ = 0;
  }
  return progressed;
}

ProgressState ProgressTracker::state(ProgressBasis basis) const {
  return {basis, streak_, basis == ProgressBasis::Checkpoint ? best_committed_ : best_max_step_};
}

}  // namespace tenax::launch
