// The example's training loop as a fault-tolerant program under tenax-launch (docs/worker-protocol.md): resumes from
// the newest complete checkpoint (resharding to this run's layout), checkpoints asynchronously every N steps, reports
// heartbeats and commits to the launcher, measures every step's phases (tenax/metrics.hpp), and on preemption finishes
// the current step, takes a synchronous emergency checkpoint and exits with kExitPreempted.
#pragma once

#include <string>

#include "tenax/runtime.hpp"
#include "trainer.hpp"
#include "training_checkpoint.hpp"

namespace tenax::examples {

struct RunOptions {
  int steps = 0;                  // total optimizer steps of the run, counting those before a resume
  CheckpointSettings checkpoint;  // dir "" disables checkpoints (and resuming)
  std::string run_dir;            // metrics outputs go to <run_dir>/metrics/ ("" : TENAX_RUN_DIR, or none)
};

// Runs the training on every rank of runtime.world(); returns the process exit code.
int run_training(Runtime& runtime, const TrainConfig& config, const RunOptions& options);

}  // namespace tenax::examples
