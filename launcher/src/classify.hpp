// Turning what an attempt left behind into one outcome, and the outcome into a decision. Pure functions.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "hang_detector.hpp"
#include "heartbeats.hpp"
#include "node_probe.hpp"
#include "options.hpp"
#include "output_scanner.hpp"
#include "restart_progress.hpp"

namespace tenax::launch {

// tenax-launch's own exit codes, beside tenax::kExitSuccess / kExitUsage / kExitPreempted (runtime.hpp).
inline constexpr int kExitGaveUp = 70;      // --max-restarts used up, or too few healthy nodes left
inline constexpr int kExitNoProgress = 71;  // restart loop: --no-progress-limit attempts without progress

enum class Outcome { Success, Usage, Preempted, Crash, PeerFailure, Hang, NodeLost };
const char* outcome_name(Outcome outcome);

struct AttemptEvidence {
  std::optional<HangVerdict> hang;       // the launcher killed the attempt for this hang
  bool preemption_forwarded = false;     // the launcher received SIGTERM/SIGUSR1 and passed it on
  int forwarded_signal = 0;              // the signal it passed on (a rank without handlers dies of it)
  bool preempt_deadline_passed = false;  // the ranks were still running after --preempt-grace and were killed
  int manager_exit_code = -1;            // mpirun/srun: exit code, or -1 when killed by a signal
  int manager_signal = 0;
  std::vector<Heartbeat> beats;             // the ranks' last heartbeats
  std::optional<FailureEvent> first_event;  // first failure the process manager reported
  // Every node the process manager reported lost during the attempt, in order, whenever the report came: also after
  // another failure was noticed or a hang verdict began the teardown (Slurm's node-failure report often comes last).
  std::vector<FailureEvent> lost_nodes;
  // Slurm: the nodes whose slurmd refused or did not accept a connection when probed after the attempt failed
  // (node_probe.hpp; the supervisor probes only a failure that is not already a lost node).
  std::vector<std::string> unreachable_nodes;
  // Slurm: the nodes that answered that probe far slower than the others (a link at a trickle), slowest first.
  std::vector<SlowNode> slow_nodes;
  int first_dead_rank = -1;  // local mode: first rank seen gone without an exit record
};

struct Classification {
  Outcome outcome = Outcome::Crash;
  int rank = -1;     // the rank to blame, -1 when none
  std::string node;  // its node, "" when unknown
  bool node_lost = false;
  // A preemption was requested during the attempt: whatever the outcome, it is not relaunched now.
  bool preemption_requested = false;
  std::string summary;  // one line: what happened and to whom
};

// Whether a process manager's report is a failure: a rank killed by a signal other than the forwarded preemption
// signal (a rank without handlers yet dies of that one), or an exit code other than 0 and 75 (preempted).
bool is_failure_report(const FailureEvent& event, int forwarded_signal);

// Preemption: the attempt is a clean preemption only when a rank confirmed the emergency checkpoint (exit 75, which a
// rank gives only once the checkpoint is committed on every rank) and no rank failed before that; a rank that dies or
// crashes during the emergency checkpoint makes the attempt that failure (crash, peer failure), and ranks still
// running after --preempt-grace a hang.

Classification classify(const AttemptEvidence& evidence);

struct Decision {
  enum class Action { Finish, Retry, Stop } action;
  int exit_code = 0;  // Finish / Stop
  std::chrono::milliseconds backoff{0};
  std::string reason;  // one line
};

// A failure while a preemption was requested is counted like any other (--max-restarts, --no-progress-limit), but not
// relaunched: the launcher stops with 75 (run again to resume from the newest committed checkpoint) unless a limit
// stops the run first (70, 71).
// `failed_restarts`: relaunches after failures already made in this run (this attempt's not included);
// `progress`: the restart-loop state with this attempt recorded (its streak counts consecutive failed attempts, this
// one included, without progress on its basis; see restart_progress.hpp).
Decision decide(const Options& options, const Classification& classified, int failed_restarts,
                const ProgressState& progress);

}  // namespace tenax::launch
