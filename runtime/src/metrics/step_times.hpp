// Internal: what one rank measured for one step, and the intervals kept for the Chrome trace.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tenax/metrics.hpp"

namespace tenax::metrics::detail {

using PhaseSeconds = std::array<double, kPhaseCount>;

struct StepTimes {
  std::int64_t step = 0;
  double total = 0;  // seconds; equals the sum of `seconds`
  PhaseSeconds seconds{};
};

// One interval of the timeline, on the host clock (ns of the steady clock), or device time mapped onto it.
enum class Track : std::uint8_t { Host = 0, Device = 1 };
struct TraceInterval {
  Track track = Track::Host;
  int kind = 0;  // a Phase, or kStepKind for the whole step
  std::int64_t step = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};
inline constexpr int kStepKind = kPhaseCount;

inline int index_of(Phase phase) {
  return static_cast<int>(phase);
}

}  // namespace tenax::metrics::detail
