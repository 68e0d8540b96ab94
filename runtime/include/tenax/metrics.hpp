// Step metrics: where each training step's time goes, per rank, aggregated over ranks, at negligible cost.
//
//   tenax::metrics::StepMetrics metrics(runtime.world());     // collective; options from TENAX_* (below)
//   for (std::int64_t step = first; step < last; ++step) {
//     metrics.begin_step(step);
//     { auto t = metrics.measure(Phase::DataWait); batch = loader.next(); }
//     { auto t = metrics.measure(Phase::Compute); forward_backward(batch); }
//     { auto t = metrics.measure(Phase::Comm); gradients.wait(); }         // only the part not overlapped
//     { auto t = metrics.measure(Phase::Optimizer); optimizer.step(); }
//     { auto t = metrics.measure(Phase::Checkpoint); checkpoint.maybe_save(step); }
//     metrics.end_step();                                                 // collective every TENAX_METRICS_EVERY
//   }
//   metrics.finish();                                                     // collective: summary, last records
//
// Accounting: between begin_step and end_step exactly one phase is current (Other at first). measure() makes its phase
// current until the scope ends and then restores the previous one, so nested scopes are exclusive (Comm inside Compute
// counts as Comm only) and the phases of a step always add up to the step's time.
//
// Clocks: on the CPU, a monotonic host clock. With Options::cuda_stream set (CUDA builds), every phase change also
// records a CUDA event on that stream, and the step's phases are the device time between consecutive events: work
// enqueued asynchronously is charged to the phase that enqueued it, and DataWait becomes the time the device sat idle
// waiting for the batch (zero when the host waited while the device was still busy). The step's work must be ordered
// on that stream (other streams joined to it with events). Device steps are contiguous: device idle time between
// end_step and the next begin_step is charged to the next step's Other. Results are read without stalling the stream,
// except once per TENAX_METRICS_EVERY steps, where the window's last event is waited for before the gather.
//
// Collectives: the constructor, end_step (every `every` steps; the trace is gathered at the first of these after the
// trace window) and finish() are collective over `comm` (a host, i.e. MPI, communicator). Every rank must call
// begin_step/end_step for the same steps; a mismatch is detected at the next gather and throws UsageError. Not
// thread-safe: one thread drives it.
//
// Files (rank 0, in <TENAX_RUN_DIR>/metrics/; nothing is written when the run directory is empty):
//   steps.jsonl                         one line per step aggregated over ranks, start/stragglers/end events (appended)
//   tenax.prom                          Prometheus text format, replaced atomically every `every` steps
//   trace-steps<A>-<B>-attempt<N>.json  Chrome-trace timeline of steps [A, B) when TENAX_TRACE_STEPS=A:B
//   summary-attempt<N>.{txt,json}       end-of-run summary with advice; goodput across restarts from ../ledger.jsonl
// N is the attempt (TENAX_ATTEMPT from tenax-launch, else 1 + the starts already in steps.jsonl), so a restarted run
// never overwrites an earlier attempt's files.
// docs/metrics.md documents every field.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tenax/communicator.hpp"

namespace tenax::metrics {

enum class Phase : std::uint8_t {
  DataWait,      // waiting for the next batch (starvation)
  HostToDevice,  // copying the batch to the device
  Compute,       // forward and backward
  Comm,          // communication not overlapped with compute (exposed)
  Optimizer,     // optimizer step, unscale, non-finite checks
  Checkpoint,    // the blocking part of a checkpoint
  Other,         // everything not attributed to a phase above
};
inline constexpr int kPhaseCount = 7;
// "data_wait", "h2d", "compute", "comm", "optimizer", "checkpoint", "other": the names used in every output.
std::string_view phase_name(Phase phase);

struct Options {
  bool enabled = true;               // TENAX_METRICS: false makes every call a no-op (and no collective)
  std::string run_dir;               // TENAX_RUN_DIR: "" writes no files
  int every = 100;                   // TENAX_METRICS_EVERY: steps per gather, straggler check and .prom update
  double straggler_threshold = 0.2;  // TENAX_STRAGGLER_THRESHOLD: busy time > median * (1 + threshold)
  std::int64_t trace_first = -1;     // TENAX_TRACE_STEPS=A:B: steps [A, B), B - A <= 1000; -1: none
  std::int64_t trace_end = -1;       // one past the last traced step
  std::string prometheus_file;       // TENAX_METRICS_PROM: "" -> <run_dir>/metrics/tenax.prom
  void* cuda_stream = nullptr;       // a cudaStream_t: time phases on the device with CUDA events
  // TENAX_PROFILE_OPS=A:B: the engine's op profile (tenax/op_profile.hpp) of steps [A, B); -1: none.
  std::int64_t op_profile_first = -1;
  std::int64_t op_profile_end = -1;
  // Reads the TENAX_* variables above (validated by the env registry). cuda_stream stays null.
  static Options from_env();
};

// A rank whose busy time (step time minus exposed communication, i.e. the time it did not spend waiting for its
// peers) exceeded the median over ranks by more than the threshold, over one window of steps.
struct Straggler {
  int rank = 0;
  std::string host;
  double busy_seconds = 0;         // mean per step over the window
  double median_busy_seconds = 0;  // median over ranks of the same
  double excess = 0;               // busy / median - 1
};

struct Summary {
  std::int64_t steps = 0;                            // steps measured in this attempt
  double mean_step_seconds = 0;                      // mean over steps of the mean over ranks
  std::array<double, kPhaseCount> phase_fraction{};  // share of step time per phase (adds up to 1)
  double step_efficiency = 0;                        // compute / step time
  double starvation = 0;                             // data wait / step time
  double exposed_comm = 0;                           // exposed communication / step time
  double checkpoint_stall = 0;                       // checkpoint / step time
  std::optional<double> goodput;  // productive / wall time over all attempts in the ledger, if there is one
  int attempts = 0;               // attempts the goodput covers: the ledger's finished ones and this one (0: no ledger)
  std::vector<std::string> advice;  // e.g. "data-bound: ..."
  std::string table;                // the human-readable summary (also logged at info and written by rank 0)
};

// What training reached at one step: the curves tenax-report draws beside the phases. The loss is the same on every
// rank; tokens count the global batch.
struct Progress {
  std::int64_t step = 0;
  double loss = 0;           // mean token loss of the step's global batch
  std::uint64_t tokens = 0;  // tokens trained in the step (all ranks together)
  double step_seconds = 0;   // wall time of the step on the calling rank (tokens / this = tokens/s)
  double learning_rate = 0;
  bool skipped = false;                   // fp16 overflow: no update
  std::optional<double> validation_loss;  // when the step was followed by a validation pass
};

class StepMetrics {
 public:
  // Collective over comm (gathers host names). Throws UsageError for bad options or a non-host communicator.
  explicit StepMetrics(Communicator& comm, Options options = Options::from_env());
  ~StepMetrics();
  StepMetrics(const StepMetrics&) = delete;
  StepMetrics& operator=(const StepMetrics&) = delete;

  void begin_step(std::int64_t step);
  // Makes `phase` current (until the next enter or end_step).
  void enter(Phase phase);

  // Makes a phase current for the scope's lifetime, then restores the previous one.
  class Scope {
   public:
    Scope(Scope&& other) noexcept : owner_(other.owner_), previous_(other.previous_) { other.owner_ = nullptr; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope& operator=(Scope&&) = delete;
    ~Scope() {
      if (owner_ != nullptr) owner_->leave(previous_);
    }

   private:
    friend class StepMetrics;
    Scope(StepMetrics* owner, Phase previous) : owner_(owner), previous_(previous) {}
    StepMetrics* owner_;
    Phase previous_;
  };
  [[nodiscard]] Scope measure(Phase phase);

  // Closes the step. Collective when it completes a window of `every` steps (then a finished trace also goes to rank
  // 0). Throws UsageError when the ranks measured different steps, or rethrows an error a Scope's destructor had to
  // hold.
  void end_step();
  // Rank 0 appends one line to <run_dir>/metrics/training.jsonl right away (docs/metrics.md): a crash loses no step
  // already logged. Other ranks' calls, and calls without a run directory, do nothing. Not collective; call after
  // end_step() of the same step. A write that fails (a full disk) is logged once and turns the metrics files off, as
  // for every metrics file: it never stops training.
  void log_progress(const Progress& progress);
  // Collective: flushes the partial window and the trace, writes the summary (rank 0) and returns it (every rank).
  // Call once, after the last end_step.
  Summary finish();

  // Stragglers found in the most recent window (identical on every rank).
  const std::vector<Straggler>& stragglers() const;
  const Options& options() const;
  bool device_timing() const;  // true when phases are timed with CUDA events

 private:
  struct State;
  void leave(Phase previous) noexcept;
  std::unique_ptr<State> state_;
};

}  // namespace tenax::metrics
