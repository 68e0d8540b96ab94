#include "training_run.hpp"

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>

#include "tenax/log.hpp"
#include "tenax/metrics.hpp"
#include "tenax/worker.hpp"

namespace tenax::examples {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Every rank must stop at the same step, so the flag of any rank stops all of them.
bool any_rank_preempted(Communicator& world, bool local) {
  std::int32_t flag = local ? 1 : 0;
  world.all_reduce(&flag, &flag, 1, DType::I32, ReduceOp::Max);
  return flag != 0;
}

void print_step(const StepResult& r) {
  if (r.skipped)
    std::printf("step %ld loss %.6f (skipped: gradient overflow at loss scale %g)\n", r.step, r.loss, r.loss_scale);
  else
    std::printf("step %ld loss %.6f\n", r.step, r.loss);
  std::fflush(stdout);
}

// On stderr: stdout carries only what is reproducible bit for bit (losses, checksum), and timings never are.
void print_summary(const metrics::Summary& summary) {
  std::fprintf(stderr, "%s\n", summary.table.c_str());
  std::fflush(stderr);
}

int train(Runtime& runtime, worker::Worker& worker, const TrainConfig& config, const RunOptions& options) {
  Communicator& world = runtime.world();
  const bool report = runtime.rank() == 0;
  Trainer trainer(world, config);
  if (report)
    std::printf("layout %s, precision %s%s, %d steps; loss of an untrained model ~%.3f, floor of the data ~%.3f\n",
                trainer.layout().to_string().c_str(), std::string(config.precision.name()).c_str(),
                trainer.context().on_device() ? " on GPUs (one per rank, NCCL groups)" : "", options.steps,
                std::log(static_cast<double>(config.model.vocab)), trainer.loss_floor());

  std::unique_ptr<TrainingCheckpoint> checkpoint;
  ResumeResult resume;
  if (!options.checkpoint.dir.empty()) {
    checkpoint = std::make_unique<TrainingCheckpoint>(world, trainer, options.checkpoint);
    resume = checkpoint->resume();
    // GPU runs: copy the state to the host only for the steps a periodic save will read (the emergency and final
    // saves below ask for it themselves); a no-op on the CPU.
    trainer.set_host_state_refresh(options.checkpoint.every);
  }
  if (report) {
    for (const std::string& why : resume.rejected)
      TENAX_LOG(Warn, "example") << "skipped a damaged checkpoint: " << why;
    if (resume.resumed) {
      std::printf("resumed from %s at step %ld (saved with layout %s on %d ranks)\n", resume.path.c_str(), resume.step,
                  resume.saved_layout.to_string().c_str(), resume.saved_world_size);
      TENAX_LOG(Info, "example") << "checkpoint of step " << resume.step << " loaded in " << resume.load_seconds
                                 << " s";
    }
    std::fflush(stdout);
  }
  worker.resumed_from(resume.step, resume.load_seconds);

  metrics::Options metrics_options = metrics::Options::from_env();
  if (!options.run_dir.empty()) metrics_options.run_dir = options.run_dir;
  metrics::StepMetrics metrics(world, metrics_options);
  trainer.set_metrics(&metrics);

  double stall_seconds = 0;  // training time blocked by checkpoints since the last commit reported
  auto report_commits = [&] {
    if (!checkpoint) return;
    if (std::optional<long> committed = checkpoint->take_new_commit()) {
      worker.checkpoint_committed(*committed, stall_seconds);
      stall_seconds = 0;
    }
  };

  while (trainer.progress().step < options.steps) {
    metrics.begin_step(trainer.progress().step + 1);
    const StepResult r = trainer.step();
    if (checkpoint) {
      auto measured = metrics.measure(metrics::Phase::Checkpoint);
      const Clock::time_point start = Clock::now();
      checkpoint->after_step(r.step);
      stall_seconds += seconds_since(start);
    }
    metrics.end_step();
    if (report) print_step(r);
    worker.heartbeat(r.step);
    report_commits();

    if (any_rank_preempted(world, worker.preemption_requested())) {
      if (checkpoint) {
        const Clock::time_point start = Clock::now();
        trainer.sync_state_to_host();
        checkpoint->emergency_save(r.step);
        stall_seconds += seconds_since(start);
        report_commits();
        if (report) std::printf("preempted: emergency checkpoint of step %ld committed\n", r.step);
      } else {
        TENAX_LOG(Warn, "example") << "preempted at step " << r.step
                                   << " without a checkpoint directory: the progress is lost (pass --checkpoint-dir)";
      }
      // No rank may exit before every rank's part of the checkpoint is committed: mpirun kills the rest at once.
      world.barrier();
      const metrics::Summary summary = metrics.finish();
      if (report) print_summary(summary);
      return worker.finish(kExitPreempted);
    }
  }

  const std::uint64_t checksum = trainer.parameters_checksum();
  if (report) std::printf("final parameters checksum: %016" PRIx64 "\n", checksum);
  std::fflush(stdout);
  if (checkpoint) {
    const Clock::time_point start = Clock::now();
    trainer.sync_state_to_host();
    checkpoint->finish(trainer.progress().step);
    stall_seconds += seconds_since(start);
    report_commits();
  }
  const metrics::Summary summary = metrics.finish();
  if (report) print_summary(summary);
  return worker.finish(kExitSuccess);
}

}  // namespace

int run_training(Runtime& runtime, const TrainConfig& config, const RunOptions& options) {
  worker::Worker worker(runtime.rank());
  try {
    return train(runtime, worker, config, options);
  } catch (const std::exception& error) {
    // The exit record tells tenax-launch what happened (a usage error is never retried); the error still propagates
    // to tenax::run_main, which reports it and exits with the same code.
    worker.finish(worker::exit_code_for(error));
    throw;
  }
}

}  // namespace tenax::examples
