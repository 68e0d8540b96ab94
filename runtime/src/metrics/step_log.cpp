// The lines of steps.jsonl: one per step (aggregated over ranks) and the start / stragglers / end events between them.
#include <string>

#include "core/json.hpp"
#include "metrics/outputs.hpp"

namespace tenax::metrics::detail {
namespace {

std::string stat_object(const Stat& s) {
  return "{\"min\":" + json::number(s.min) + ",\"median\":" + json::number(s.median) +
         ",\"max\":" + json::number(s.max) + ",\"mean\":" + json::number(s.mean) + "}";
}

std::string head(const char* event, const RunIdentity& run) {
  return std::string("{\"event\":\"") + event + "\",\"attempt\":" + std::to_string(run.attempt);
}

}  // namespace

std::string start_line(const RunIdentity& run, double unix_time, int every, std::span<const std::string> hosts) {
  std::string line = head("start", run) + ",\"unix_time\":" + json::number(unix_time) +
                     ",\"ranks\":" + std::to_string(run.ranks) + ",\"timer\":" + json::quote(run.timer) +
                     ",\"every\":" + std::to_string(every) + ",\"hosts\":[";
  for (std::size_t r = 0; r < hosts.size(); ++r)
    line += (r ? "," : "") + json::quote(hosts[r]);
  return line + "]}\n";
}

std::string step_lines(const RunIdentity& run, std::span<const StepAggregate> steps, std::span<const double> unix_times,
                       std::span<const std::string> hosts) {
  std::string out;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const StepAggregate& s = steps[i];
    const double mean = s.total.mean;
    auto fraction = [&](Phase p) {
      return json::number(mean > 0 ? s.phase[static_cast<std::size_t>(index_of(p))].mean / mean : 0.0);
    };
    out += head("step", run) + ",\"step\":" + std::to_string(s.step) + ",\"unix_time\":" + json::number(unix_times[i]) +
           ",\"ranks\":" + std::to_string(s.ranks) + ",\"step_s\":" + stat_object(s.total) +
           ",\"slowest_rank\":" + std::to_string(s.slowest_rank) +
           ",\"slowest_host\":" + json::quote(hosts[static_cast<std::size_t>(s.slowest_rank)]) +
           ",\"efficiency\":" + fraction(Phase::Compute) + ",\"starvation\":" + fraction(Phase::DataWait) +
           ",\"exposed_comm\":" + fraction(Phase::Comm) + ",\"phases_s\":{";
    for (int p = 0; p < kPhaseCount; ++p)
      out += (p ? ",\"" : "\"") + std::string(phase_name(static_cast<Phase>(p))) +
             "\":" + stat_object(s.phase[static_cast<std::size_t>(p)]);
    out += "}}\n";
  }
  return out;
}

std::string stragglers_line(const RunIdentity& run, std::int64_t first_step, std::int64_t last_step, double threshold,
                            std::span<const Straggler> stragglers) {
  std::string line = head("stragglers", run) + ",\"first_step\":" + std::to_string(first_step) +
                     ",\"last_step\":" + std::to_string(last_step) + ",\"threshold\":" + json::number(threshold) +
                     ",\"ranks\":[";
  for (std::size_t i = 0; i < stragglers.size(); ++i) {
    const Straggler& s = stragglers[i];
    line += std::string(i ? "," : "") + "{\"rank\":" + std::to_string(s.rank) + ",\"host\":" + json::quote(s.host) +
            ",\"busy_s\":" + json::number(s.busy_seconds) +
            ",\"median_busy_s\":" + json::number(s.median_busy_seconds) + ",\"excess\":" + json::number(s.excess) + "}";
  }
  return line + "]}\n";
}

std::string end_line(const RunIdentity& run, double unix_time, std::int64_t steps) {
  return head("end", run) + ",\"unix_time\":" + json::number(unix_time) + ",\"steps\":" + std::to_string(steps) + "}\n";
}

std::string progress_line(const RunIdentity& run, double unix_time, const Progress& p) {
  std::string line = head("progress", run) + ",\"step\":" + std::to_string(p.step) +
                     ",\"unix_time\":" + json::number(unix_time) + ",\"loss\":" + json::number(p.loss) +
                     ",\"tokens\":" + std::to_string(p.tokens) + ",\"step_s\":" + json::number(p.step_seconds) +
                     ",\"lr\":" + json::number(p.learning_rate) + ",\"skipped\":" + (p.skipped ? "true" : "false");
  if (p.validation_loss) line += ",\"validation_loss\":" + json::number(*p.validation_loss);
  return line + "}\n";
}

}  // namespace tenax::metrics::detail
