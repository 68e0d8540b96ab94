// Internal: the text of every metrics output (the writing itself is in step_metrics.cpp). Pure functions, so each
// format is unit-tested on its own. docs/metrics.md documents the fields.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "metrics/aggregate.hpp"
#include "metrics/ledger.hpp"

namespace tenax::metrics::detail {

// ---- steps.jsonl -------------------------------------------------------------------------------------------------
struct RunIdentity {
  int attempt = 1;
  int ranks = 1;
  std::string timer;  // "host" or "device"
};
std::string start_line(const RunIdentity& run, double unix_time, int every, std::span<const std::string> hosts);
// One line per step. unix_times[i]: when rank 0 began steps[i].
std::string step_lines(const RunIdentity& run, std::span<const StepAggregate> steps, std::span<const double> unix_times,
                       std::span<const std::string> hosts);
std::string stragglers_line(const RunIdentity& run, std::int64_t first_step, std::int64_t last_step, double threshold,
                            std::span<const Straggler> stragglers);
std::string end_line(const RunIdentity& run, double unix_time, std::int64_t steps);

// ---- training.jsonl ----------------------------------------------------------------------------------------------
std::string progress_line(const RunIdentity& run, double unix_time, const Progress& progress);

// ---- Prometheus text format --------------------------------------------------------------------------------------
// The labels that join tenax's series with a site's per-job monitoring (as NVIDIA's DCGM exporter labels GPU
// telemetry with the HPC job): under Slurm job (SLURM_JOB_ID, or <array job>_<task> for an array task), user
// (SLURM_JOB_USER) and step (SLURM_STEP_ID); nothing outside Slurm. Values longer than 256 bytes are cut there.
std::vector<std::pair<std::string, std::string>> slurm_job_labels();

struct PromSnapshot {
  std::string run;                                              // value of the `run` label (the run directory's name)
  std::vector<std::pair<std::string, std::string>> job_labels;  // on every series after `run` (slurm_job_labels())
  RunIdentity identity;
  std::int64_t steps_total = 0;
  std::int64_t last_step = 0;
  double step_seconds_total = 0;         // sum over steps of the mean over ranks
  PhaseSeconds phase_seconds_total{};    // same, per phase
  Stat window_step;                      // over the last window: mean of each per-step statistic
  PhaseSeconds window_phase_fraction{};  // over the last window
  std::vector<double> busy_per_rank;     // over the last window
  std::vector<std::string> hosts;
  std::size_t stragglers = 0;
  double unix_time = 0;
};
std::string format_prometheus(const PromSnapshot& snapshot);

// ---- Chrome trace ------------------------------------------------------------------------------------------------
inline constexpr int kFieldsPerInterval = 5;  // track, kind, step, start (us, unix clock), duration (us)
// Appends intervals in the gather layout; `steady_to_unix_us` maps the steady clock onto the unix clock.
void pack(std::span<const TraceInterval> intervals, double steady_to_unix_us, std::vector<double>& out);
// per_rank[r]: rank r's intervals in the pack() layout.
std::string format_chrome_trace(std::span<const std::vector<double>> per_rank, std::span<const std::string> hosts);

// ---- Summary -----------------------------------------------------------------------------------------------------
struct RunTotals {
  std::int64_t steps = 0;
  double step_seconds = 0;  // sum over steps of the mean over ranks
  PhaseSeconds phase_seconds{};
  std::map<int, int> straggler_windows;  // rank -> windows in which it was a straggler
  int windows = 0;
};
Summary summarize(const RunTotals& totals, const std::optional<Goodput>& goodput, const RunIdentity& run,
                  std::span<const std::string> hosts);
std::string summary_json(const Summary& summary, const RunTotals& totals, const std::optional<Goodput>& goodput,
                         const RunIdentity& run);

}  // namespace tenax::metrics::detail
