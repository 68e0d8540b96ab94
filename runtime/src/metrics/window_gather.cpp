// StepMetrics' collective path: every `every` steps the window's step times are gathered from all ranks (one
// all_gather), aggregated, checked for stragglers and written out by rank 0; finish() flushes the rest and summarises.
#include <algorithm>
#include <chrono>
#include <filesystem>

#include "core/file_system.hpp"
#include "metrics/ledger.hpp"
#include "metrics/run_files.hpp"
#include "metrics/step_metrics_state.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"

namespace tenax::metrics {
namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

template <class Fn>
void StepMetrics::State::write_files(Fn&& fn) {
  if (rank != 0 || files_failed) return;
  try {
    fn();
  } catch (const Error& e) {
    files_failed = true;
    TENAX_LOG(Error, "metrics") << e.what() << "; metrics files are no longer written for this run";
  }
}

void StepMetrics::State::collect_device_steps(bool wait) {
  detail::DeviceStep done;
  while (device->pop(wait, done)) {
    window.push_back(done.times);
    trace.insert(trace.end(), done.intervals.begin(), done.intervals.end());
  }
}

void StepMetrics::State::gather_window() {
  if (device) collect_device_steps(true);
  const int steps = static_cast<int>(window.size());
  std::vector<double> mine;
  mine.reserve(static_cast<std::size_t>(steps) * detail::kFieldsPerStep);
  detail::pack(window, mine);
  std::vector<double> all(mine.size() * static_cast<std::size_t>(ranks));
  comm.all_gather(mine.data(), all.data(), mine.size(), DType::F64);

  const std::vector<detail::StepAggregate> aggregates = detail::aggregate(all, ranks, steps);
  stragglers = detail::find_stragglers(all, ranks, steps, hosts, options.straggler_threshold);
  detail::PromSnapshot prom;
  double window_seconds = 0;
  for (const detail::StepAggregate& a : aggregates) {
    totals.steps += 1;
    totals.step_seconds += a.total.mean;
    window_seconds += a.total.mean;
    prom.window_step.min += a.total.min / steps;
    prom.window_step.median += a.total.median / steps;
    prom.window_step.max += a.total.max / steps;
    prom.window_step.mean += a.total.mean / steps;
    for (int p = 0; p < kPhaseCount; ++p) {
      totals.phase_seconds[static_cast<std::size_t>(p)] += a.phase[static_cast<std::size_t>(p)].mean;
      prom.window_phase_fraction[static_cast<std::size_t>(p)] += a.phase[static_cast<std::size_t>(p)].mean;
    }
  }
  for (double& f : prom.window_phase_fraction)
    f = window_seconds > 0 ? f / window_seconds : 0.0;
  totals.windows += 1;
  for (const Straggler& st : stragglers)
    totals.straggler_windows[st.rank] += 1;
  const std::int64_t first_step = aggregates.empty() ? 0 : aggregates.front().step;
  const std::int64_t last_step = aggregates.empty() ? 0 : aggregates.back().step;
  if (rank == 0) {
    for (const Straggler& st : stragglers) {
      TENAX_LOG(Warn, "metrics") << "straggler in steps " << first_step << "-" << last_step << ": rank " << st.rank
                                 << " on " << st.host << " busy " << st.busy_seconds << " s/step, "
                                 << static_cast<int>(100 * st.excess + 0.5) << "% over the median "
                                 << st.median_busy_seconds << " s";
    }
  }

  write_files([&] {
    if (!steps_path.empty() && steps > 0) {
      std::vector<double> starts(window_unix_starts.begin(), window_unix_starts.begin() + steps);
      std::string lines = detail::step_lines(identity, aggregates, starts, hosts);
      if (!stragglers.empty())
        lines += detail::stragglers_line(identity, first_step, last_step, options.straggler_threshold, stragglers);
      detail::append(steps_path, lines, detail::Sync::No);
    }
    if (!prom_path.empty()) {
      prom.run = std::filesystem::path(options.run_dir.empty() ? prom_path : options.run_dir).filename().string();
      prom.identity = identity;
      prom.job_labels = detail::slurm_job_labels();
      prom.steps_total = totals.steps;
      prom.last_step = last_step;
      prom.step_seconds_total = totals.step_seconds;
      prom.phase_seconds_total = totals.phase_seconds;
      prom.busy_per_rank = detail::busy_per_rank(all, ranks, steps);
      prom.hosts = hosts;
      prom.stragglers = stragglers.size();
      prom.unix_time = unix_now();
      fs::replace_file_atomically(prom_path, detail::format_prometheus(prom), fs::Durability::None);
    }
  });
  window.clear();
  if (rank == 0) window_unix_starts.erase(window_unix_starts.begin(), window_unix_starts.begin() + steps);
  ended_in_window = 0;

  // Every rank decides alike: the step numbers are the same everywhere.
  if (trace_seen && !trace_written && last_ended_step >= options.trace_end - 1) write_trace();
}

// The trace goes to rank 0 alone (point-to-point, one rank after the other): it can be large, and no other rank needs
// it, unlike the window records that every rank uses for the straggler verdict.
void StepMetrics::State::write_trace() {
  trace_written = true;
  std::vector<double> mine;
  mine.reserve(trace.size() * detail::kFieldsPerInterval);
  detail::pack(trace, steady_to_unix_us, mine);
  trace.clear();
  trace.shrink_to_fit();
  std::vector<std::vector<double>> per_rank;
  if (rank != 0) {
    const auto count = static_cast<std::int64_t>(mine.size());
    comm.send(&count, 1, DType::I64, 0);
    comm.send(mine.data(), mine.size(), DType::F64, 0);
    return;
  }
  per_rank.push_back(std::move(mine));
  for (int r = 1; r < ranks; ++r) {
    std::int64_t count = 0;
    comm.recv(&count, 1, DType::I64, r);
    per_rank.emplace_back(static_cast<std::size_t>(count));
    comm.recv(per_rank.back().data(), per_rank.back().size(), DType::F64, r);
  }
  if (metrics_dir.empty()) return;
  write_files([&] {
    const std::string path = metrics_dir + "/trace-steps" + std::to_string(options.trace_first) + "-" +
                             std::to_string(options.trace_end) + "-attempt" + std::to_string(identity.attempt) +
                             ".json";
    fs::replace_file_atomically(path, detail::format_chrome_trace(per_rank, hosts), fs::Durability::Contents);
    TENAX_LOG(Info, "metrics") << "trace of steps " << options.trace_first << "-" << options.trace_end - 1
                               << " written to " << path;
  });
}

Summary StepMetrics::State::finish() {
  finished = true;
  // The last, partial window: its size must agree everywhere before it can be gathered.
  if (device) collect_device_steps(true);
  const auto ended = static_cast<std::int64_t>(ended_in_window);
  std::vector<std::int64_t> all_ended(static_cast<std::size_t>(ranks));
  comm.all_gather(&ended, all_ended.data(), 1, DType::I64);
  for (int r = 0; r < ranks; ++r)
    if (all_ended[static_cast<std::size_t>(r)] != ended)
      throw UsageError("metrics: at finish() rank " + std::to_string(r) + " has ended " +
                       std::to_string(all_ended[static_cast<std::size_t>(r)]) +
                       " steps since the last gather and rank " + std::to_string(rank) + " " + std::to_string(ended) +
                       ": every rank must call begin_step/end_step for the same steps");
  if (ended > 0) gather_window();
  if (trace_seen && !trace_written) write_trace();

  // Goodput needs the ledger, which only rank 0 reads; everyone gets its figures.
  double figures[6] = {0, 0, 0, 0, 0, 0};  // present, attempts, productive, lost, wall, goodput
  if (rank == 0 && !options.run_dir.empty()) {
    try {
      const auto attempts = detail::read_ledger(options.run_dir + "/ledger.jsonl");
      if (auto g = detail::compute_goodput(attempts, totals.step_seconds, unix_now())) {
        figures[0] = 1;
        figures[1] = g->attempts;
        figures[2] = g->productive_s;
        figures[3] = g->lost_s;
        figures[4] = g->wall_s;
        figures[5] = g->goodput;
      }
    } catch (const Error& e) {
      TENAX_LOG(Error, "metrics") << e.what() << "; goodput is left out of the summary";
    }
  }
  comm.broadcast(figures, 6, DType::F64, 0);
  std::optional<detail::Goodput> goodput;
  if (figures[0] != 0)
    goodput = detail::Goodput{static_cast<int>(figures[1]), figures[2], figures[3], figures[4], figures[5]};

  Summary summary = detail::summarize(totals, goodput, identity, hosts);
  if (rank == 0) {
    TENAX_LOG(Info, "metrics") << "\n" << summary.table;
  }
  if (!metrics_dir.empty())
    write_files([&] {
      const std::string base = metrics_dir + "/summary-attempt" + std::to_string(identity.attempt);
      fs::replace_file_atomically(base + ".txt", summary.table, fs::Durability::Contents);
      fs::replace_file_atomically(base + ".json", detail::summary_json(summary, totals, goodput, identity),
                                  fs::Durability::Contents);
      detail::append(steps_path, detail::end_line(identity, unix_now(), totals.steps), detail::Sync::Yes);
    });
  return summary;
}

}  // namespace tenax::metrics
