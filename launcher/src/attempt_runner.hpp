// Runs one attempt: start the process manager (mpirun or srun), copy its output, watch heartbeats, the ranks' pids
// (local mode) and the launcher's own signals, and tear the attempt down on the first sign of failure.
//
// Teardown, and why it differs by cause:
//   crash   a rank is already dead, so no collective (and no emergency checkpoint) can complete: SIGKILL at once.
//   hang    SIGTERM first (srun: the double SIGINT that makes it cancel the step), SIGKILL after --kill-grace.
//   preemption  the signal is forwarded (mpirun forwards SIGUSR1 to every rank; srun forwards what it gets) and the
//           ranks get --preempt-grace to checkpoint and exit 75 before the hang-style teardown.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "attempt_plan.hpp"
#include "classify.hpp"
#include "node_probe.hpp"
#include "options.hpp"

namespace tenax::launch {

struct AttemptReport {
  AttemptEvidence evidence;
  double start_unix = 0;        // process manager started
  double ready_unix = -1;       // every rank wrote its first heartbeat
  double first_step_unix = -1;  // the first step of this attempt completed
  double noticed_unix = -1;     // the launcher noticed a failure (-1: none)
  double end_unix = 0;          // every process of the attempt reaped
  double relaunch_s = 0;        // start -> ready
  double detect_s = 0;          // last sign of life of the culprit -> noticed (an upper bound)
  double teardown_s = 0;        // noticed -> every process reaped
  std::int64_t max_step = -1;
  std::int64_t resumed_step = -1;
  // "shared" when any rank read the shared tier, "node-local" when the ranks read only the node-local one, "" before
  // a resume from a checkpoint (or from a program too old to say).
  std::string resumed_tier;
  std::int64_t checkpoint_step = -1;
  std::int64_t steps_done = 0;
  double productive_s = 0, load_s = 0, checkpoint_stall_s = 0;
  double final_checkpoint_s = 0;  // of checkpoint_stall_s: the checkpoint that ended the attempt
  // Checkpoints committed per tier, as the ranks' last heartbeats say (the largest count of any rank: a rank whose
  // last beat predates the attempt's last commit counts it one short).
  std::int64_t shared_saves = 0, local_saves = 0;
  double hang_timeout_s = 0;  // the hang timeout in force at the end
};

// The hang detector's settings for these options.
HangSettings hang_settings(const Options& options);

// Asks the allocation's nodes how they answer (node_probe.hpp); given by the supervisor under Slurm.
using NodeProber = std::function<NodeProbeResult()>;

// `probe`, when given, runs at a hang verdict that names no node, before the teardown: while the ranks still wait in
// their collective, a link at a trickle is still full and answers late (once the ranks are gone it drains, and a
// connection crosses it as fast as any). What it finds goes into the evidence (unreachable_nodes, slow_nodes).
// Called about once a second while the attempt runs: keeps the run's directory locks (DirectoryLock::renew, which
// takes a lock file removed by hand again); false when another launcher took one of the directories meanwhile, which
// ends the attempt at once (two runs in one directory remove each other's checkpoints).
using LockKeeper = std::function<bool()>;

AttemptReport run_attempt(const Options& options, const AttemptPlan& plan, const Command& command,
                          const std::string& run_dir, const NodeProber& probe = {}, const LockKeeper& keep_locks = {});

}  // namespace tenax::launch
