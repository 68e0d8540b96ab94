// Internal: turning the per-rank step times of one window, gathered from every rank, into per-step statistics over
// ranks and a list of stragglers. Pure functions (unit-tested without MPI).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "metrics/step_times.hpp"

namespace tenax::metrics::detail {

// Doubles per step in the gathered buffer: step, total, one per phase.
inline constexpr int kFieldsPerStep = 2 + kPhaseCount;

// Appends `steps` to `out` in the gather layout.
void pack(std::span<const StepTimes> steps, std::vector<double>& out);

struct Stat {
  double min = 0, median = 0, max = 0, mean = 0;
};
Stat describe(std::span<const double> values);  // values must not be empty

struct StepAggregate {
  std::int64_t step = 0;
  int ranks = 0;
  Stat total;
  std::array<Stat, kPhaseCount> phase;
  int slowest_rank = 0;  // largest total (lowest rank on ties)
};

// `gathered` holds ranks blocks of steps * kFieldsPerStep doubles (rank r's block at r * steps * kFieldsPerStep).
// Throws UsageError if the ranks measured different steps.
std::vector<StepAggregate> aggregate(std::span<const double> gathered, int ranks, int steps);

// Ranks whose mean busy time per step (total minus exposed communication: the time a rank did not spend waiting for
// its peers, which in synchronous training is where a slow rank shows; its total is pulled to everyone else's) exceeds
// the median over ranks by more than `threshold` (0.2 = 20%) and by at least kStragglerMinSeconds per step (so that
// jitter on microsecond steps is not reported). Sorted by excess, largest first.
inline constexpr double kStragglerMinSeconds = 1e-3;
std::vector<Straggler> find_stragglers(std::span<const double> gathered, int ranks, int steps,
                                       std::span<const std::string> hosts, double threshold);

// Mean busy seconds per step of each rank over the window.
std::vector<double> busy_per_rank(std::span<const double> gathered, int ranks, int steps);

}  // namespace tenax::metrics::detail
