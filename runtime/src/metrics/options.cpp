// Phase names and the TENAX_* variables behind metrics::Options.
#include <charconv>
#include <string>

#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/metrics.hpp"

namespace tenax::metrics {
namespace {

std::int64_t parse_step(std::string_view text, std::string_view whole) {
  std::int64_t value = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0)
    throw UsageError("TENAX_TRACE_STEPS=" + std::string(whole) +
                     " is not a step range: use A:B with step numbers 0 <= A < B (traces steps A to B-1)");
  return value;
}

}  // namespace

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::DataWait:
      return "data_wait";
    case Phase::HostToDevice:
      return "h2d";
    case Phase::Compute:
      return "compute";
    case Phase::Comm:
      return "comm";
    case Phase::Optimizer:
      return "optimizer";
    case Phase::Checkpoint:
      return "checkpoint";
    case Phase::Other:
      return "other";
  }
  return "other";
}

Options Options::from_env() {
  Options o;
  o.enabled = env::get_bool("TENAX_METRICS");
  o.run_dir = env::get_string("TENAX_RUN_DIR");
  o.every = static_cast<int>(env::get_int("TENAX_METRICS_EVERY"));
  o.straggler_threshold = env::get_double("TENAX_STRAGGLER_THRESHOLD");
  o.prometheus_file = env::get_string("TENAX_METRICS_PROM");
  const std::string trace = env::get_string("TENAX_TRACE_STEPS");
  if (!trace.empty()) {
    const std::size_t colon = trace.find(':');
    if (colon == std::string::npos)
      throw UsageError("TENAX_TRACE_STEPS=" + trace + " has no ':': use A:B to trace steps A to B-1");
    o.trace_first = parse_step(std::string_view(trace).substr(0, colon), trace);
    o.trace_end = parse_step(std::string_view(trace).substr(colon + 1), trace);
  }
  return o;
}

}  // namespace tenax::metrics
