// The whole fault-tolerant run under tenax-launch (docs/worker-protocol.md): resume, train with periodic checkpoints,
// heartbeats and commits, the emergency checkpoint on preemption, the final checkpoint and the summary.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "comm/agreement.hpp"
#include "engine/engine_state.hpp"
#include "process/mpi_alive.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"
#include "tenax/worker.hpp"

namespace tenax {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Before the exit record: finish() is a rank's last call, after which tenax-launch may end the attempt (a preempted
// one half a second after every rank's record, docs/worker-protocol.md). On stderr: stdout carries only what is
// reproducible bit for bit (losses, checksums), and timings never are.
void print_summary(const Engine::Impl& e) {
  if (e.world.rank() != 0 || e.summary.empty()) return;
  std::fprintf(stderr, "%s\n", e.summary.c_str());
  std::fflush(stderr);
}

int train(Engine& engine, Engine::Impl& e, worker::Worker& worker, const StepCallback& on_step) {
  const ResumeInfo resume = e.resume();
  if (e.world.rank() == 0) {
    for (const std::string& why : resume.rejected)
      TENAX_LOG(Warn, "engine") << "skipped a damaged checkpoint: " << why;
    if (resume.resumed) {
      std::printf("resumed from %s at step %ld (saved with layout %s on %d ranks)\n", resume.path.c_str(), resume.step,
                  resume.saved_layout.to_string().c_str(), resume.saved_world_size);
      std::fflush(stdout);
      // (At the last step exactly, the run had finished: a relaunch after its end resumes there.)
      if (resume.step > e.config.steps)
        TENAX_LOG(Warn, "engine") << "the checkpoint is at step " << resume.step << ", past the run's "
                                  << e.config.steps << " steps: nothing is trained; give more steps to go on";
    }
  }
  worker.resumed_from(resume.step, resume.seconds,
                      resume.node_local ? worker::CheckpointTier::NodeLocal : worker::CheckpointTier::Shared);

  metrics::Options options = metrics::Options::from_env();
  if (!e.config.run_dir.empty()) options.run_dir = e.config.run_dir;
  options.cuda_stream = e.ctx->stream();
  metrics::StepMetrics metrics(e.world, options);
  e.metrics = &metrics;
  struct Detach {
    Engine::Impl& e;
    ~Detach() { e.metrics = nullptr; }
  } detach{e};

  double stall = 0;  // training time blocked by checkpoints since the last commit reported
  // The newest commit told to the launcher (the resumed step counts as told).
  std::uint64_t reported = resume.resumed ? static_cast<std::uint64_t>(resume.step) : 0;
  // `final_s`: the checkpoint that ends the attempt took that long (in `stall`); reported even without a new commit
  // (a step saved already is not saved again), so that no stall goes unreported.
  auto report_commits = [&](double final_s = -1) {
    if (!e.writer) return;
    const Checkpointer::CommitCounts counts = e.writer->commit_counts();
    worker.checkpoint_counts(static_cast<std::int64_t>(counts.shared), static_cast<std::int64_t>(counts.node_local));
    // A step every rank holds a node-local copy of is a checkpoint to resume from, as much as a shared one.
    std::optional<std::uint64_t> committed = e.writer->last_committed_step();
    if (const auto local = e.writer->last_local_step(); local && (!committed || *local > *committed)) committed = local;
    if ((committed && *committed != reported) || (final_s >= 0 && reported > 0)) {
      if (committed) reported = *committed;
      worker.checkpoint_committed(static_cast<std::int64_t>(reported), stall, std::max(0.0, final_s));
      stall = 0;
    }
  };

  const ValidationPolicy& validation = e.config.validation;
  while (e.step < e.config.steps) {
    metrics.begin_step(e.step + 1);
    StepResult r = e.train_step();
    {
      auto measured = metrics.measure(metrics::Phase::Checkpoint);
      const Clock::time_point start = Clock::now();
      e.after_step_checkpoint(r.seconds);
      stall += seconds_since(start);
    }
    metrics.end_step();
    // Outside the step's metrics: validation is not training time, and the goodput says so.
    if (validation.source && ((validation.every > 0 && r.step % validation.every == 0) || r.step == e.config.steps))
      r.validation_loss = engine.evaluate(*validation.source, 0, validation.samples);
    metrics.log_progress({.step = r.step,
                          .loss = r.loss,
                          .tokens = r.tokens,
                          .step_seconds = r.seconds,
                          .learning_rate = r.lr,
                          .skipped = r.skipped,
                          .validation_loss = r.validation_loss});
    if (on_step) on_step(r);
    worker.heartbeat(r.step);
    report_commits();
    // Every rank must stop at the same step, so the flag of any rank stops all of them.
    if (any_rank(e.world, worker.preemption_requested())) {
      if (e.writer) {
        const Clock::time_point start = Clock::now();
        e.save_checkpoint(true);
        const double took = seconds_since(start);
        stall += took;
        report_commits(took);
        if (e.world.rank() == 0) {
          std::printf("preempted: emergency checkpoint of step %ld committed\n", e.step);
          std::fflush(stdout);
        }
      } else {
        TENAX_LOG(Warn, "engine") << "preempted at step " << e.step
                                  << " without a checkpoint directory: the progress is lost";
      }
      // No rank may exit before every rank's part of the checkpoint is committed: mpirun kills the rest at once.
      e.world.barrier();
      e.summary = metrics.finish().table + e.interval_notes();
      print_summary(e);
      return worker.finish(kExitPreempted);
    }
  }
  if (e.writer) {
    const Clock::time_point start = Clock::now();
    try {
      e.save_checkpoint(false);
    } catch (const IoError& error) {
      // An earlier checkpoint's failure, raised once the final one was under way, does not stop the final one; a
      // failure of the final one itself (nothing in flight) ends the run as a failure.
      if (e.writer->step_being_written() != static_cast<std::uint64_t>(e.step)) throw;
      if (e.world.rank() == 0)
        TENAX_LOG(Warn, "engine") << "an earlier checkpoint failed (" << error.what()
                                  << "); the final checkpoint goes on";
    }
    e.settle_checkpoint();
    const double took = seconds_since(start);
    stall += took;
    report_commits(took);
  }
  e.summary = metrics.finish().table + e.interval_notes();
  print_summary(e);
  return worker.finish(kExitSuccess);
}

}  // namespace

int Engine::run(const StepCallback& on_step) {
  detail::refuse_after_finalize("Engine::run()");
  if (impl_->in_run)
    throw UsageError(
        "Engine::run() called from its own step callback: run() already takes every step to config.steps; "
        "return from the callback instead");
  impl_->in_run = true;
  struct Leave {
    bool& flag;
    ~Leave() { flag = false; }
  } leave{impl_->in_run};
  worker::Worker worker(impl_->world.rank());
  try {
    return train(*this, *impl_, worker, on_step);
  } catch (const std::exception& error) {
    // The exit record tells tenax-launch what happened (a usage error is never retried); the error still propagates
    // to tenax::run_main, which reports it and exits with the same code.
    worker.finish(worker::exit_code_for(error));
    throw;
  }
}

}  // namespace tenax
