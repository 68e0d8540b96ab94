// Internal: the state behind StepMetrics, shared by the per-step path (step_metrics.cpp) and the collective path that
// gathers windows, writes the outputs and builds the summary (window_gather.cpp).
#pragma once

#include <deque>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "metrics/device_step_timer.hpp"
#include "metrics/outputs.hpp"
#include "tenax/metrics.hpp"

namespace tenax::metrics {

struct StepMetrics::State {
  State(Communicator& c, Options o) : comm(c), options(std::move(o)) {}

  Communicator& comm;
  Options options;
  int rank = 0;
  int ranks = 1;
  std::vector<std::string> hosts;
  std::unique_ptr<detail::DeviceStepTimer> device;  // null: host timing
  double steady_to_unix_us = 0;

  // The step in progress.
  bool in_step = false;
  bool tracing = false;  // the current step is in the trace window
  std::int64_t step = 0;
  Phase current = Phase::Other;
  std::int64_t step_start_ns = 0;
  std::int64_t last_change_ns = 0;
  std::array<std::int64_t, kPhaseCount> phase_ns{};
  std::exception_ptr deferred_error;  // from a Scope's destructor, rethrown by end_step

  // Steps ended since the last gather; `window` holds those already resolved (all of them with host timing).
  int ended_in_window = 0;
  std::int64_t last_ended_step = -1;
  std::vector<detail::StepTimes> window;
  std::deque<double> window_unix_starts;  // rank 0's begin time of each ended step, in order

  // Trace window.
  std::vector<detail::TraceInterval> trace;
  bool trace_seen = false;     // a traced step has ended
  bool trace_written = false;  // the trace has been gathered and written

  // Run totals (identical on every rank: computed from gathered data).
  detail::RunTotals totals;
  std::vector<Straggler> stragglers;
  bool finished = false;

  // Files (rank 0). Empty paths: that output is off.
  detail::RunIdentity identity;
  std::string metrics_dir;
  std::string steps_path;
  std::string progress_path;  // training.jsonl (rank 0, with a run directory)
  std::string prom_path;
  bool files_failed = false;  // a write failed once: logged, and the files are left alone from then on

  bool traced(std::int64_t s) const { return s >= options.trace_first && s < options.trace_end; }

  void collect_device_steps(bool wait);  // moves completed device steps into `window` (and `trace`)
  void gather_window();                  // collective
  void write_trace();                    // collective
  Summary finish();                      // collective
  // Runs a file write on rank 0; a failure is logged once and turns the file outputs off instead of stopping training.
  template <class Fn>
  void write_files(Fn&& fn);
};

}  // namespace tenax::metrics
