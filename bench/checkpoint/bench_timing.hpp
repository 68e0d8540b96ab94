// Timing helpers the checkpoint benchmarks share: a monotonic clock, the median of repetitions, and the slowest rank.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

#include "tenax/communicator.hpp"

namespace tenax::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Largest value over ranks: a collective step is as slow as its slowest rank.
inline double max_over_ranks(Communicator& world, double v) {
  world.all_reduce(&v, &v, 1, DType::F64, ReduceOp::Max);
  return v;
}

}  // namespace tenax::bench
