#include "engine/checkpoint_interval.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "tenax/env.hpp"
#include "tenax/error.hpp"

namespace tenax {

double daly_interval_s(double cost_s, double mtbf_s) {
  if (!(std::isfinite(cost_s) && cost_s > 0) || !(std::isfinite(mtbf_s) && mtbf_s > 0))
    throw UsageError("checkpoint interval: the checkpoint cost (" + std::to_string(cost_s) + " s) and the mean time " +
                     "between failures (" + std::to_string(mtbf_s) + " s) must both be > 0");
  if (cost_s >= 2 * mtbf_s) return mtbf_s;
  const double ratio = cost_s / (2 * mtbf_s);
  return std::sqrt(2 * cost_s * mtbf_s) * (1 + std::sqrt(ratio) / 3 + ratio / 9) - cost_s;
}

int interval_in_steps(double interval_s, double step_s, long max_steps) {
  const long cap = std::max(1L, max_steps);
  if (!(step_s > 0) || !std::isfinite(interval_s / step_s)) return static_cast<int>(std::min<long>(cap, 1L << 30));
  const double steps = std::round(interval_s / step_s);
  return static_cast<int>(std::clamp<double>(steps, 1, static_cast<double>(std::min<long>(cap, 1L << 30))));
}

int automatic_interval_steps(double cost_s, double mtbf_s, double step_s, long max_steps, int steps_to_commit) {
  const int optimum = interval_in_steps(daly_interval_s(cost_s, mtbf_s), step_s, max_steps);
  const long floor = std::min<long>(std::max(1L, max_steps), std::min(steps_to_commit, 1 << 30));
  return static_cast<int>(std::max<long>(optimum, floor));
}

bool automatic_save_now(long steps_since, int every, bool previous_in_flight) {
  if (steps_since < every) return false;
  return !previous_in_flight || steps_since >= 2L * every;
}

MtbfChoice choose_mtbf(double configured_s, int nodes, FailuresCovered covered) {
  if (configured_s > 0) return {configured_s, "the program"};
  const auto seconds = [](std::string_view name) {
    return static_cast<double>(env::get_duration(name).count()) / 1000.0;
  };
  if (covered == FailuresCovered::BeyondNodeLocal)
    if (const double observed = seconds("TENAX_RUN_SHARED_MTBF"); observed > 0)
      return {observed, "this run's failures beyond the node-local tier (TENAX_RUN_SHARED_MTBF)"};
  if (const double observed = seconds("TENAX_RUN_MTBF"); observed > 0)
    return {observed, "this run's failures (TENAX_RUN_MTBF)"};
  if (env::is_set("TENAX_MTBF")) return {seconds("TENAX_MTBF"), "TENAX_MTBF"};
  if (const double node = seconds("TENAX_NODE_MTBF"); node > 0) {
    const int n = std::max(1, nodes);
    return {node / n, "TENAX_NODE_MTBF (" + env::get_string("TENAX_NODE_MTBF") + ") over " + std::to_string(n) +
                          (n == 1 ? " node" : " nodes")};
  }
  return {seconds("TENAX_MTBF"), "TENAX_MTBF's default"};
}

std::optional<SaveMeasure> SharedSaveCost::before_save() {
  if (call_s_ < 0) return std::nullopt;
  const SaveMeasure so_far{.cost_s = call_s_ + polls_s_, .steps_to_commit = polls_ + 1};
  call_s_ = -1;
  return so_far;
}

void SharedSaveCost::saved(double call_s) {
  call_s_ = call_s;
  polls_s_ = 0;
  polls_ = 0;
}

std::optional<SaveMeasure> SharedSaveCost::polled(double poll_s, bool in_flight_before, bool in_flight_after) {
  if (call_s_ < 0) return std::nullopt;
  if (in_flight_before) {
    polls_s_ += poll_s;
    ++polls_;
  }
  if (in_flight_after) return std::nullopt;
  const SaveMeasure measure{.cost_s = call_s_ + polls_s_, .steps_to_commit = polls_};
  call_s_ = -1;
  return measure;
}

void SharedSaveCost::failed() {
  call_s_ = -1;
}

std::optional<SaveMeasure> LocalSaveCost::saved(double call_s) {
  std::optional<SaveMeasure> previous;
  if (call_s_ >= 0) previous = SaveMeasure{.cost_s = call_s_ + polls_s_};
  call_s_ = call_s;
  polls_s_ = 0;
  return previous;
}

}  // namespace tenax
