// The worker side of the tenax-launch protocol (docs/worker-protocol.md): heartbeats, preemption signals, exit codes
// and the timings the launcher's goodput ledger needs.
//
//   int main(int argc, char** argv) {
//     tenax::Runtime runtime(argc, argv);
//     tenax::worker::Worker worker(runtime.rank());        // installs SIGTERM/SIGUSR1 handlers, starts heartbeats
//     auto step = load_newest_checkpoint(worker.info().checkpoint_dir);  // the program finds it itself
//     worker.resumed_from(step, load_seconds);
//     for (; step < steps; ++step) {
//       train_one_step();
//       worker.heartbeat(step + 1);                         // cheap: an uncontended lock and a clock read
//       if (agree_on_any_rank(worker.preemption_requested())) {   // every rank must stop at the same step
//         save_checkpoint(); worker.checkpoint_committed(step + 1, stall_seconds, final_seconds);
//         return worker.finish(tenax::kExitPreempted);
//       }
//     }
//     return worker.finish(tenax::kExitSuccess);
//   }
//
// Threads: heartbeat(), resumed_from(), checkpoint_committed() and finish() are called from the training thread.
// A Worker owns one background thread that rewrites this rank's heartbeat file every TENAX_HEARTBEAT_INTERVAL (and at
// once when a preemption signal arrives). Because that thread keeps beating while the training thread is blocked, the
// launcher sees the live collective sequence number (tenax::operations_issued()) of every rank: a stopped process goes
// silent, a rank stuck outside a collective shows a lower sequence number than its peers. Without tenax-launch
// (TENAX_RUN_DIR unset) no file is written and everything else still works.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>

#include "tenax/runtime.hpp"

namespace tenax::worker {

// What tenax-launch told this process through the environment (defaults when started without it).
struct LaunchInfo {
  bool supervised = false;      // TENAX_RUN_DIR is set: heartbeats are written
  std::string run_dir;          // TENAX_RUN_DIR
  std::string checkpoint_dir;   // TENAX_CHECKPOINT_DIR ("" when the launcher was given none)
  int attempt = 1;              // TENAX_ATTEMPT: 1 for the first attempt of the run, counting across requeues
  int restart_count = 0;        // TENAX_RESTART_COUNT: relaunches so far in this run (attempt - 1)
  int slurm_restart_count = 0;  // SLURM_RESTART_COUNT (Slurm requeues of the job; 0 when unset)
  int original_world_size = 0;  // TENAX_ORIGINAL_WORLD_SIZE: set when the launcher shrank data parallelism
  std::string node;             // SLURMD_NODENAME under Slurm, else the host name
};

// Reads the environment (validated by tenax::Runtime through the TENAX_* registry).
LaunchInfo launch_info();

// Installs SIGTERM and SIGUSR1 handlers that only record the signal (async-signal-safe). Idempotent. A Worker does
// it; call it directly only in a program that uses no Worker.
void install_preemption_handlers();
// True once SIGTERM or SIGUSR1 arrived. Lock-free; safe from any thread and from signal handlers.
bool preemption_requested() noexcept;
// The signal that requested preemption (0 when none).
int preemption_signal() noexcept;

// The protocol's exit code for an exception that ended the program: UsageError -> kExitUsage (never retried),
// CommError -> kExitPeerFailure (another rank or node is to blame), anything else -> kExitCrash.
int exit_code_for(const std::exception& error) noexcept;

// The tier a resumed checkpoint was read from. tenax-launch counts the failures whose restart needed the shared tier
// (TENAX_RUN_SHARED_MTBF): with a node-local tier, those are what the shared tier's automatic interval must cover.
enum class CheckpointTier { Shared, NodeLocal };

class Worker {
 public:
  // One per process, created after tenax::Runtime (rank known). Installs the preemption handlers, and when supervised
  // writes a first heartbeat (step -1: started, not yet resumed) and starts the heartbeat thread.
  // Throws IoError when the run directory cannot be written.
  explicit Worker(int rank);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  const LaunchInfo& info() const;

  // The run resumed at `step` (0 for a fresh start) after `load_seconds` spent loading the checkpoint, read from
  // `tier` (ignored for a fresh start). A program with its own checkpoints reads them from durable storage: Shared.
  void resumed_from(std::int64_t step, double load_seconds, CheckpointTier tier = CheckpointTier::Shared);
  // Step `step` completed (steps count completed optimizer steps: the first one is 1). The time since the previous
  // heartbeat (or resumed_from) is counted as productive step time; the checkpoint stalls reported since the previous
  // heartbeat come off the total, whichever earlier steps they fell in.
  void heartbeat(std::int64_t step);
  // A checkpoint of `step` is complete and durable; training was blocked for `stall_seconds` by checkpoints since the
  // previous call, of which `final_seconds` by the checkpoint that ends the attempt (the last one of training, or the
  // emergency one on preemption). The goodput summary shows that one apart: a run pays it once per end or preemption,
  // whatever its checkpoint interval, and on a slow shared file system it is the largest single stall.
  void checkpoint_committed(std::int64_t step, double stall_seconds, double final_seconds = 0);
  // How many checkpoints this attempt has committed so far to the shared tier and to the node-local tier (running
  // totals, not increments; Checkpointer::commit_counts). tenax-launch adds them up over the run (the goodput
  // summary's "checkpoints committed"). A program that never calls this reports none.
  void checkpoint_counts(std::int64_t shared, std::int64_t node_local);

  bool preemption_requested() const noexcept { return tenax::worker::preemption_requested(); }

  // Writes the final heartbeat carrying `exit_code`, stops the heartbeat thread and returns `exit_code` (for main()).
  // The rank's last act of the attempt: under tenax-launch (local mode), once every rank's record says 75, the attempt
  // ends half a second later and what is still running is killed (docs/launcher.md, Preemption). Print and flush
  // what must be seen before calling it.
  int finish(int exit_code);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tenax::worker
