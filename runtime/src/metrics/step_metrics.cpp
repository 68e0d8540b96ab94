// StepMetrics: the per-step path (a clock read and a few stores per phase change, plus a CUDA event record with device
// timing) and set-up. The collective path is in window_gather.cpp.
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "core/host_name.hpp"
#include "metrics/run_files.hpp"
#include "metrics/step_metrics_state.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"

namespace tenax::metrics {
namespace {

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr std::size_t kHostNameBytes = 64;

void validate(const Options& o, const Communicator& comm) {
  if (comm.backend() != Backend::Mpi)
    throw UsageError("metrics: StepMetrics needs a host (MPI) communicator, got " +
                     std::string(backend_name(comm.backend())) + " group '" + comm.name() + "': pass runtime.world()");
  if (o.every < 1)
    throw UsageError("metrics: every = " + std::to_string(o.every) + " must be >= 1 (TENAX_METRICS_EVERY)");
  if (!(o.straggler_threshold > 0))
    throw UsageError("metrics: straggler threshold " + std::to_string(o.straggler_threshold) +
                     " must be > 0 (TENAX_STRAGGLER_THRESHOLD, e.g. 0.2 for 20% slower than the median)");
  if (o.trace_first >= 0 && !(o.trace_end > o.trace_first && o.trace_end - o.trace_first <= 1000))
    throw UsageError("metrics: trace steps [" + std::to_string(o.trace_first) + ", " + std::to_string(o.trace_end) +
                     ") must hold 1 to 1000 steps (TENAX_TRACE_STEPS=A:B with A < B <= A + 1000)");
}

std::vector<std::string> gather_hosts(Communicator& comm) {
  std::string mine = tenax::detail::node_name();
  mine.resize(kHostNameBytes - 1);  // names longer than 63 bytes are cut; the padding is NULs
  std::vector<char> all(kHostNameBytes * static_cast<std::size_t>(comm.size()), '\0');
  comm.all_gather(mine.c_str(), all.data(), kHostNameBytes, DType::U8);
  std::vector<std::string> hosts;
  for (int r = 0; r < comm.size(); ++r)
    hosts.emplace_back(all.data() + kHostNameBytes * static_cast<std::size_t>(r));
  return hosts;
}

int count_start_events(const std::string& steps_path) {
  const std::string text = detail::read_if_exists(steps_path);
  int count = 0;
  for (std::size_t pos = text.find("{\"event\":\"start\""); pos != std::string::npos;
       pos = text.find("{\"event\":\"start\"", pos + 1))
    ++count;
  return count;
}

}  // namespace

StepMetrics::StepMetrics(Communicator& comm, Options options)
    : state_(std::make_unique<State>(comm, std::move(options))) {
  State& s = *state_;
  if (!s.options.enabled) return;
  validate(s.options, comm);
  s.rank = comm.rank();
  s.ranks = comm.size();
  if (s.options.cuda_stream != nullptr) s.device = detail::make_device_step_timer(s.options.cuda_stream);
  s.identity.ranks = s.ranks;
  s.identity.timer = s.device ? "device" : "host";
  s.steady_to_unix_us = static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count()) -
                        static_cast<double>(steady_ns()) / 1e3;
  s.hosts = gather_hosts(comm);

  // Rank 0 prepares the run directory and tells everyone whether it could, so that a bad TENAX_RUN_DIR fails on every
  // rank at once instead of leaving the others waiting at the first gather.
  std::int32_t setup[2] = {1, 1};  // ok, attempt
  std::string setup_error;
  if (s.rank == 0) {
    try {
      // The launcher's attempt number, so that steps.jsonl and its ledger agree; without a launcher, this run
      // directory's own count of starts.
      if (!s.options.run_dir.empty()) {
        s.metrics_dir = s.options.run_dir + "/metrics";
        s.steps_path = s.metrics_dir + "/steps.jsonl";
        s.progress_path = s.metrics_dir + "/training.jsonl";
        detail::make_directories(s.metrics_dir);
      }
      setup[1] = env::is_set("TENAX_ATTEMPT") ? static_cast<std::int32_t>(env::get_int("TENAX_ATTEMPT"))
                 : s.steps_path.empty()       ? 1
                                              : count_start_events(s.steps_path) + 1;
      s.identity.attempt = setup[1];
      if (!s.steps_path.empty()) {
        const double now_us = static_cast<double>(steady_ns()) / 1e3 + s.steady_to_unix_us;
        detail::append(s.steps_path, detail::start_line(s.identity, now_us / 1e6, s.options.every, s.hosts),
                       detail::Sync::Yes);
      }
      s.prom_path = !s.options.prometheus_file.empty() ? s.options.prometheus_file
                    : s.metrics_dir.empty()            ? std::string()
                                                       : s.metrics_dir + "/tenax.prom";
    } catch (const Error& e) {
      setup[0] = 0;
      setup_error = e.what();
    }
  }
  comm.broadcast(setup, 2, DType::I32, 0);
  if (setup[0] == 0)
    throw IoError(s.rank == 0 ? setup_error
                              : "metrics: rank 0 could not prepare the run directory " + s.options.run_dir +
                                    " (its error names the cause): fix TENAX_RUN_DIR");
  s.identity.attempt = setup[1];
  s.window.reserve(static_cast<std::size_t>(s.options.every));
}

StepMetrics::~StepMetrics() = default;

void StepMetrics::begin_step(std::int64_t step) {
  State& s = *state_;
  if (!s.options.enabled) return;
  if (s.in_step)
    throw UsageError("metrics: begin_step(" + std::to_string(step) + ") while step " + std::to_string(s.step) +
                     " is open: call end_step() first");
  if (s.finished) throw UsageError("metrics: begin_step() after finish(): create a new StepMetrics for a new run");
  s.in_step = true;
  s.step = step;
  s.tracing = s.traced(step);
  s.current = Phase::Other;
  s.phase_ns.fill(0);
  s.step_start_ns = s.last_change_ns = steady_ns();
  if (s.device) s.device->begin_step(step, s.tracing);
}

void StepMetrics::enter(Phase phase) {
  State& s = *state_;
  if (!s.options.enabled) return;
  if (!s.in_step)
    throw UsageError("metrics: phase " + std::string(phase_name(phase)) +
                     " entered outside a step: call it between begin_step() and end_step()");
  if (phase == s.current) return;
  const std::int64_t now = steady_ns();
  s.phase_ns[static_cast<std::size_t>(detail::index_of(s.current))] += now - s.last_change_ns;
  if (s.tracing) s.trace.push_back({detail::Track::Host, detail::index_of(s.current), s.step, s.last_change_ns, now});
  if (s.device) s.device->mark(s.current);
  s.last_change_ns = now;
  s.current = phase;
}

StepMetrics::Scope StepMetrics::measure(Phase phase) {
  State& s = *state_;
  if (!s.options.enabled) return Scope(nullptr, phase);
  const Phase previous = s.current;
  enter(phase);
  return Scope(this, previous);
}

void StepMetrics::leave(Phase previous) noexcept {
  State& s = *state_;
  if (!s.in_step) return;  // the step ended inside the scope: nothing to restore
  try {
    enter(previous);
  } catch (...) {
    if (!s.deferred_error) s.deferred_error = std::current_exception();
  }
}

void StepMetrics::end_step() {
  State& s = *state_;
  if (!s.options.enabled) return;
  if (!s.in_step) throw UsageError("metrics: end_step() without begin_step()");
  if (s.deferred_error) {
    s.in_step = false;  // a device timer that failed mid-step cannot finish it; the error says why
    std::rethrow_exception(std::exchange(s.deferred_error, nullptr));
  }
  const std::int64_t now = steady_ns();
  s.phase_ns[static_cast<std::size_t>(detail::index_of(s.current))] += now - s.last_change_ns;
  if (s.tracing) {
    s.trace.push_back({detail::Track::Host, detail::index_of(s.current), s.step, s.last_change_ns, now});
    s.trace.push_back({detail::Track::Host, detail::kStepKind, s.step, s.step_start_ns, now});
    s.trace_seen = true;
  }
  s.in_step = false;
  if (s.rank == 0)
    s.window_unix_starts.push_back((static_cast<double>(s.step_start_ns) / 1e3 + s.steady_to_unix_us) / 1e6);
  if (s.device) {
    s.device->end_step(s.current);
    s.collect_device_steps(false);
  } else {
    detail::StepTimes t;
    t.step = s.step;
    std::int64_t total_ns = 0;
    for (int p = 0; p < kPhaseCount; ++p) {
      t.seconds[static_cast<std::size_t>(p)] = static_cast<double>(s.phase_ns[static_cast<std::size_t>(p)]) / 1e9;
      total_ns += s.phase_ns[static_cast<std::size_t>(p)];
    }
    t.total = static_cast<double>(total_ns) / 1e9;
    s.window.push_back(t);
  }
  s.last_ended_step = s.step;
  if (++s.ended_in_window == s.options.every) s.gather_window();
}

void StepMetrics::log_progress(const Progress& progress) {
  State& s = *state_;
  if (!s.options.enabled || s.rank != 0 || s.progress_path.empty() || s.files_failed) return;
  const double now_us = static_cast<double>(steady_ns()) / 1e3 + s.steady_to_unix_us;
  try {
    detail::append(s.progress_path, detail::progress_line(s.identity, now_us / 1e6, progress), detail::Sync::No);
  } catch (const Error& e) {
    // The same policy as every metrics file: monitoring never stops training.
    s.files_failed = true;
    TENAX_LOG(Error, "metrics") << e.what() << "; metrics files are no longer written for this run";
  }
}

Summary StepMetrics::finish() {
  State& s = *state_;
  if (!s.options.enabled) return Summary{};
  if (s.in_step) throw UsageError("metrics: finish() while step " + std::to_string(s.step) + " is open: end it first");
  if (s.finished) throw UsageError("metrics: finish() called twice");
  return s.finish();
}

const std::vector<Straggler>& StepMetrics::stragglers() const {
  return state_->stragglers;
}
const Options& StepMetrics::options() const {
  return state_->options;
}
bool StepMetrics::device_timing() const {
  return state_->device != nullptr;
}

}  // namespace tenax::metrics
