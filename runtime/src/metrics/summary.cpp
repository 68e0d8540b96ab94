// The end-of-run summary: the figures, a table for people, a JSON object for programs, and advice naming the phase
// that dominates and what to change for it.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "core/json.hpp"
#include "metrics/outputs.hpp"

namespace tenax::metrics::detail {
namespace {

// A phase's share of step time above which it is named as a bottleneck, with the advice for it. Compute is the useful
// work and is never a bottleneck here; Other is advice about measurement itself.
struct Rule {
  Phase phase;
  double threshold;
  const char* advice;
};
constexpr Rule kRules[] = {
    {Phase::DataWait, 0.10,
     "data-bound: raise loader workers (TENAX_LOADER_WORKERS) or prefetch depth (TENAX_LOADER_PREFETCH), or make "
     "batch production cheaper"},
    {Phase::HostToDevice, 0.10,
     "copy-bound: pin the loader's host batches and let it copy them to the device ahead of the step "
     "(DataLoaderOptions::pinned, ::device)"},
    {Phase::Comm, 0.15,
     "communication-bound: overlap the gradient all-reduce with the backward pass (smaller, earlier buckets) or "
     "reduce data-parallel traffic (larger micro-batches, tensor parallelism inside the node)"},
    {Phase::Optimizer, 0.15, "optimizer-bound: use the fused optimizer kernels or shard the optimizer state"},
    {Phase::Checkpoint, 0.05,
     "checkpoint stalls: save less often or keep only staging in the step (asynchronous writing)"},
    {Phase::Other, 0.15, "unattributed time: wrap the remaining work of the step in StepMetrics::measure()"},
};

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * fraction);
  return buf;
}

std::string row(const std::string& label, const std::string& value) {
  std::string line = "  " + label;
  line.resize(std::max<std::size_t>(line.size() + 1, 28), ' ');
  return line + value + "\n";
}

}  // namespace

Summary summarize(const RunTotals& totals, const std::optional<Goodput>& goodput, const RunIdentity& run,
                  std::span<const std::string> hosts) {
  Summary s;
  s.steps = totals.steps;
  s.mean_step_seconds = totals.steps > 0 ? totals.step_seconds / static_cast<double>(totals.steps) : 0.0;
  for (int p = 0; p < kPhaseCount; ++p)
    s.phase_fraction[static_cast<std::size_t>(p)] =
        totals.step_seconds > 0 ? totals.phase_seconds[static_cast<std::size_t>(p)] / totals.step_seconds : 0.0;
  auto share = [&](Phase p) { return s.phase_fraction[static_cast<std::size_t>(index_of(p))]; };
  s.step_efficiency = share(Phase::Compute);
  s.starvation = share(Phase::DataWait);
  s.exposed_comm = share(Phase::Comm);
  s.checkpoint_stall = share(Phase::Checkpoint);
  if (goodput) {
    s.goodput = goodput->goodput;
    s.attempts = goodput->attempts + 1;
  }

  // Advice: the phases over their threshold, the largest share first, then stragglers.
  std::vector<std::pair<double, std::string>> findings;
  for (const Rule& rule : kRules)
    if (share(rule.phase) >= rule.threshold)
      findings.emplace_back(share(rule.phase), std::string(rule.advice) + " (" + std::string(phase_name(rule.phase)) +
                                                   " " + percent(share(rule.phase)) + " of step time)");
  std::stable_sort(findings.begin(), findings.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& [fraction, text] : findings)
    s.advice.push_back(std::move(text));
  for (const auto& [rank, windows] : totals.straggler_windows)
    s.advice.push_back("straggler: rank " + std::to_string(rank) + " (" + hosts[static_cast<std::size_t>(rank)] +
                       ") was slower than the median in " + std::to_string(windows) + " of " +
                       std::to_string(totals.windows) + " windows: check that node (thermals, noisy neighbours, NIC)");
  if (s.advice.empty() && s.steps > 0)
    s.advice.push_back("compute-bound: no phase besides compute dominates (step efficiency " +
                       percent(s.step_efficiency) + ")");

  std::string& t = s.table;
  t = "tenax step metrics (attempt " + std::to_string(run.attempt) + ", " + std::to_string(run.ranks) + " ranks, " +
      run.timer + " timer)\n";
  t += row("steps", std::to_string(s.steps));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f s", s.mean_step_seconds);
  t += row("mean step time", buf);
  t += row("step efficiency", percent(s.step_efficiency) + " (compute / step time)");
  t += row("starvation", percent(s.starvation) + " (data wait / step time)");
  t += row("exposed communication", percent(s.exposed_comm));
  t += row("checkpoint stall", percent(s.checkpoint_stall));
  std::string phases;
  for (int p = 0; p < kPhaseCount; ++p)
    phases += std::string(p ? "  " : "") + std::string(phase_name(static_cast<Phase>(p))) + " " +
              percent(s.phase_fraction[static_cast<std::size_t>(p)]);
  t += row("phases", phases);
  if (goodput) {
    // Tenths below 100 s: a short run's seconds rounded to whole ones read "0 s productive of 0 s".
    const int digits = goodput->wall_s < 100 ? 1 : 0;
    // "since the first start": every second since then, idle gaps between invocations too, where tenax-launch's
    // summary counts only its invocations' time and requeue waits; the two figures differ by those gaps.
    std::snprintf(buf, sizeof buf, " (%.*f s productive of the %.*f s since the run's first start, %.*f s lost)",
                  digits, goodput->productive_s, digits, goodput->wall_s, digits, goodput->lost_s);
    t += row("goodput", percent(goodput->goodput) + " over " + std::to_string(s.attempts) +
                            (s.attempts == 1 ? " attempt" : " attempts") + buf);
  } else {
    t += row("goodput", "n/a (no ledger.jsonl in the run directory)");
  }
  for (const std::string& a : s.advice)
    t += row("advice", a);
  return s;
}

std::string summary_json(const Summary& s, const RunTotals& totals, const std::optional<Goodput>& goodput,
                         const RunIdentity& run) {
  std::string out = "{\"attempt\":" + std::to_string(run.attempt) + ",\"ranks\":" + std::to_string(run.ranks) +
                    ",\"timer\":" + json::quote(run.timer) + ",\"steps\":" + std::to_string(s.steps) +
                    ",\"mean_step_s\":" + json::number(s.mean_step_seconds) +
                    ",\"step_efficiency\":" + json::number(s.step_efficiency) +
                    ",\"starvation\":" + json::number(s.starvation) +
                    ",\"exposed_comm\":" + json::number(s.exposed_comm) +
                    ",\"checkpoint_stall\":" + json::number(s.checkpoint_stall) + ",\"phase_fraction\":{";
  for (int p = 0; p < kPhaseCount; ++p)
    out += (p ? ",\"" : "\"") + std::string(phase_name(static_cast<Phase>(p))) +
           "\":" + json::number(s.phase_fraction[static_cast<std::size_t>(p)]);
  out += "},\"stragglers\":{";
  bool first = true;
  for (const auto& [rank, windows] : totals.straggler_windows) {
    out += (first ? "\"" : ",\"") + std::to_string(rank) + "\":" + std::to_string(windows);
    first = false;
  }
  out += "},\"goodput\":";
  if (goodput)
    out += "{\"goodput\":" + json::number(goodput->goodput) + ",\"attempts\":" + std::to_string(s.attempts) +
           ",\"productive_s\":" + json::number(goodput->productive_s) + ",\"lost_s\":" + json::number(goodput->lost_s) +
           ",\"wall_s\":" + json::number(goodput->wall_s) + "}";
  else
    out += "null";
  out += ",\"advice\":[";
  for (std::size_t i = 0; i < s.advice.size(); ++i)
    out += (i ? "," : "") + json::quote(s.advice[i]);
  return out + "]}\n";
}

}  // namespace tenax::metrics::detail
