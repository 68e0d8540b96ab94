// Phase names and the TENAX_* variables behind metrics::Options.
#include <charconv>
#include <string>

#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/metrics.hpp"

namespace tenax::metrics {
namespace {

std::int64_t parse_step(std::string_view text, std::string_view variable, std::string_view whole,
                        std::string_view does) {
  std::int64_t value = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0)
    throw UsageError(std::string(variable) + "=" + std::string(whole) +
                     " is not a step range: use A:B with step numbers 0 <= A < B (" + std::string(does) +
                     " steps A to B-1)");
  return value;
}

// A:B from `variable` into [first, end); unset or empty leaves them at -1.
void parse_step_range(const char* variable, std::string_view does, std::int64_t& first, std::int64_t& end) {
  const std::string text = env::get_string(variable);
  if (text.empty()) return;
  const std::size_t colon = text.find(':');
  if (colon == std::string::npos)
    throw UsageError(std::string(variable) + "=" + text + " has no ':': use A:B to " + std::string(does) +
                     " steps A to B-1");
  first = parse_step(std::string_view(text).substr(0, colon), variable, text, does);
  end = parse_step(std::string_view(text).substr(colon + 1), variable, text, does);
  if (end <= first)
    throw UsageError(std::string(variable) + "=" + text + " is empty: use A:B with A < B (" + std::string(does) +
                     " steps A to B-1)");
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
  parse_step_range("TENAX_TRACE_STEPS", "trace", o.trace_first, o.trace_end);
  parse_step_range("TENAX_PROFILE_OPS", "profile", o.op_profile_first, o.op_profile_end);
  return o;
}

}  // namespace tenax::metrics
