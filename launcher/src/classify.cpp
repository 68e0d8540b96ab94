#include "classify.hpp"

#include <cstdio>

#include <algorithm>
#include <csignal>
#include <cstring>

#include "tenax/runtime.hpp"

namespace tenax::launch {
namespace {

std::string fixed_ms(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms", ms);
  return text;
}

std::string rank_text(int rank, const std::string& node) {
  std::string text = "rank " + std::to_string(rank);
  if (!node.empty()) text += " on " + node;
  return text;
}

std::string node_of(const std::vector<Heartbeat>& beats, int rank) {
  for (const auto& h : beats) {
    if (h.rank == rank) return h.node;
  }
  return "";
}

std::string signal_text(int signo) {
  return "signal " + std::to_string(signo) + " (" + signal_name(signo) + ")";
}

// The rank with this exit code that the process manager reported first, else the lowest such rank.
const Heartbeat* rank_with_exit(const AttemptEvidence& e, int code) {
  const Heartbeat* found = nullptr;
  for (const auto& h : e.beats) {
    if (h.exit_code != code) continue;
    if (e.first_event && e.first_event->rank == h.rank) return &h;
    if (!found || h.rank < found->rank) found = &h;
  }
  return found;
}

// A rank's own record of a failure: any exit code but 0, 75 (preempted) and -1 (still running, or died).
bool crash_record(const AttemptEvidence& e) {
  return std::any_of(e.beats.begin(), e.beats.end(),
                     [](const Heartbeat& h) { return h.exit_code > 0 && h.exit_code != kExitPreempted; });
}

// The failure and its culprit, most precise evidence first: a rank seen dying without an exit record, the process
// manager's own report, a rank's crash exit code, then the process manager's status alone.
Classification classify_failure(const AttemptEvidence& e) {
  Classification c;
  c.outcome = Outcome::Crash;
  if (e.first_dead_rank >= 0) {
    c.rank = e.first_dead_rank;
    c.node = node_of(e.beats, c.rank);
    c.summary = rank_text(c.rank, c.node) + " died without an exit record";
    if (e.first_event && e.first_event->rank == c.rank && e.first_event->kind == FailureEvent::Kind::Signal) {
      c.summary += ": killed by " + signal_text(e.first_event->value);
    }
    return c;
  }
  if (e.first_event && e.first_event->rank >= 0 && is_failure_report(*e.first_event, e.forwarded_signal)) {
    c.rank = e.first_event->rank;
    c.node = e.first_event->node.empty() ? node_of(e.beats, c.rank) : e.first_event->node;
    if (e.first_event->kind == FailureEvent::Kind::Signal) {
      c.summary = rank_text(c.rank, c.node) + " was killed by " + signal_text(e.first_event->value);
    } else {
      if (e.first_event->value == kExitPeerFailure) c.outcome = Outcome::PeerFailure;
      c.summary = rank_text(c.rank, c.node) + " exited with code " + std::to_string(e.first_event->value);
    }
    return c;
  }
  for (const auto& h : e.beats) {
    if (h.exit_code > 0 && h.exit_code != kExitPeerFailure && h.exit_code != kExitPreempted) {
      c.rank = h.rank;
      c.node = h.node;
      c.summary = rank_text(h.rank, h.node) + " exited with code " + std::to_string(h.exit_code);
      return c;
    }
  }
  if (std::any_of(e.beats.begin(), e.beats.end(), [](const Heartbeat& h) { return h.exit_code == kExitPeerFailure; })) {
    c.outcome = Outcome::PeerFailure;
    c.summary = "ranks reported a communicator failure (exit 76) without naming the failed peer";
    return c;
  }
  c.summary = e.manager_signal != 0 ? "the process manager was killed by " + signal_text(e.manager_signal)
                                    : "the process manager exited with code " + std::to_string(e.manager_exit_code) +
                                          " and no rank left an exit record";
  return c;
}

}  // namespace

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::Success:
      return "success";
    case Outcome::Usage:
      return "usage-error";
    case Outcome::Preempted:
      return "preempted";
    case Outcome::Crash:
      return "crash";
    case Outcome::PeerFailure:
      return "peer-failure";
    case Outcome::Hang:
      return "hang";
    case Outcome::NodeLost:
      return "node-lost";
  }
  return "unknown";
}

Classification classify(const AttemptEvidence& e) {
  Classification c;
  const bool manager_ok = e.manager_exit_code == 0;
  const bool all_finished = !e.beats.empty() && std::all_of(e.beats.begin(), e.beats.end(), [](const Heartbeat& h) {
    return h.exit_code == kExitSuccess;
  });
  if (!e.hang && manager_ok && (all_finished || e.beats.empty())) {
    c.outcome = Outcome::Success;
    c.summary = "all ranks finished";
    return c;
  }
  // A lost node explains what followed it (ranks killed, peers failing, a hang), whichever sign came first: Slurm's
  // report at any time of the attempt, even after the hang detector or another failure began the teardown, or, before
  // Slurm noticed, every rank of one node silent while the other nodes' ranks kept beating. The node is excluded
  // rather than given a strike, and no rank elsewhere is blamed.
  if (!e.lost_nodes.empty()) {
    const FailureEvent& lost = e.lost_nodes.front();
    c.outcome = Outcome::NodeLost;
    c.node = lost.node;
    c.node_lost = true;
    c.summary = "node " + c.node + " was lost (" + lost.text + ")";
    if (e.lost_nodes.size() > 1)
      c.summary += ", and " + std::to_string(e.lost_nodes.size() - 1) + " more node(s) after it";
    if (e.hang) c.summary += "; the hang detector had stopped the attempt first: " + e.hang->description;
    return c;
  }
  // A node that no longer answers explains a crash, a peer failure or a hang seen first on a healthy node (Open MPI
  // aborting on an unreachable peer, ranks waiting in a collective): it is the node lost, not the rank reported.
  if (!e.unreachable_nodes.empty()) {
    AttemptEvidence seen = e;
    seen.unreachable_nodes.clear();
    c.outcome = Outcome::NodeLost;
    c.node = e.unreachable_nodes.front();
    c.node_lost = true;
    c.summary = "node " + c.node + " does not answer on its slurmd port (lost, or cut off from the network)";
    if (e.unreachable_nodes.size() > 1)
      c.summary += ", nor " + std::to_string(e.unreachable_nodes.size() - 1) + " more node(s)";
    c.summary += "; what was seen first followed from it: " + classify(seen).summary;
    return c;
  }
  // A node whose link carries almost nothing still answers, late: the ranks wait on it in a collective (a hang of all
  // of them together) or time out on it (a peer failure) with no sign of which node it is. A silent node found by the
  // heartbeats below is the surer sign and comes first.
  const bool silent_node = e.hang && e.hang->kind == HangVerdict::Kind::Silent && !e.hang->silent_nodes.empty();
  if (!e.slow_nodes.empty() && !silent_node) {
    AttemptEvidence seen = e;
    seen.slow_nodes.clear();
    const SlowNode& slow = e.slow_nodes.front();
    c.outcome = Outcome::NodeLost;
    c.node = slow.node;
    c.node_lost = true;
    c.summary = "node " + c.node + " answers on its slurmd port only after " + fixed_ms(slow.answer_ms) +
                " (the nodes' median " + fixed_ms(slow.typical_ms) + "): its link is degraded";
    if (e.slow_nodes.size() > 1) c.summary += ", as on " + std::to_string(e.slow_nodes.size() - 1) + " more node(s)";
    c.summary += "; what was seen first followed from it: " + classify(seen).summary;
    return c;
  }
  if (e.hang) {
    if (e.hang->kind == HangVerdict::Kind::Silent && !e.hang->silent_nodes.empty()) {
      c.outcome = Outcome::NodeLost;
      c.node = e.hang->silent_nodes.front();
      c.node_lost = true;
      for (std::size_t i = 0; i < e.hang->ranks.size() && c.rank < 0; ++i)
        if (e.hang->nodes[i] == c.node) c.rank = e.hang->ranks[i];
      c.summary = "node " + c.node +
                  " stopped answering (dead, frozen or cut off; Slurm had not reported it yet): " + e.hang->description;
      return c;
    }
    c.outcome = Outcome::Hang;
    if (!e.hang->ranks.empty()) {
      c.rank = e.hang->ranks.front();
      c.node = e.hang->nodes.front();
    }
    c.summary = e.hang->description;
    return c;
  }
  // The SPANK plugin refused the step before any rank started (a layout the step cannot hold): the same command fails
  // the same way every time, so it is a usage error, never retried into the start-up timeout.
  if (e.first_event && e.first_event->kind == FailureEvent::Kind::Refused) {
    c.outcome = Outcome::Usage;
    c.summary = "the tenax SPANK plugin refused the step (" + e.first_event->text +
                "): fix the layout or the task count, see the message above";
    return c;
  }
  // A rank that failed before its tenax::worker::Worker existed (e.g. a bad TENAX_* variable) leaves no exit record:
  // the process manager's report of its exit code is the evidence then.
  const bool reported_usage =
      e.first_event && e.first_event->kind == FailureEvent::Kind::ExitCode && e.first_event->value == kExitUsage;
  if (const Heartbeat* h = rank_with_exit(e, kExitUsage); h || reported_usage || e.manager_exit_code == kExitUsage) {
    c.outcome = Outcome::Usage;
    const int rank = h ? h->rank : (reported_usage ? e.first_event->rank : -1);
    if (rank >= 0) {
      c.rank = rank;
      c.node = h ? h->node : (e.first_event->node.empty() ? node_of(e.beats, rank) : e.first_event->node);
      c.summary = rank_text(c.rank, c.node) +
                  " exited with the usage-error code 64: fix the command or "
                  "configuration (see its message above)";
    } else {
      c.summary = "the program exited with the usage-error code 64: fix the command or configuration";
    }
    return c;
  }
  if (e.first_event && e.first_event->kind == FailureEvent::Kind::NodeLost) {
    c.outcome = Outcome::NodeLost;
    c.node = e.first_event->node;
    c.node_lost = true;
    c.summary = "node " + c.node + " was lost (" + e.first_event->text + ")";
    return c;
  }
  const int confirmed = static_cast<int>(
      std::count_if(e.beats.begin(), e.beats.end(), [](const Heartbeat& h) { return h.exit_code == kExitPreempted; }));
  const bool reported_preempted =
      e.first_event && e.first_event->kind == FailureEvent::Kind::ExitCode && e.first_event->value == kExitPreempted;
  // Exit 75 means the emergency checkpoint is committed on every rank (docs/worker-protocol.md); a program without
  // heartbeats says so only through the process manager.
  const bool checkpoint_confirmed = confirmed > 0 || reported_preempted || e.manager_exit_code == kExitPreempted;
  if (checkpoint_confirmed && e.first_dead_rank < 0 && !crash_record(e)) {
    c.outcome = Outcome::Preempted;
    c.preemption_requested = e.preemption_forwarded;
    std::int64_t checkpoint = -1;
    for (const auto& h : e.beats)
      checkpoint = std::max(checkpoint, h.checkpoint_step);
    c.summary = std::to_string(confirmed) + " of " + std::to_string(e.beats.size()) +
                " ranks exited with the preempted code 75 after the emergency checkpoint";
    if (checkpoint >= 0) c.summary += " (newest checkpoint: step " + std::to_string(checkpoint) + ")";
    if (e.preempt_deadline_passed) c.summary += "; the ranks left after --preempt-grace were killed";
    return c;
  }
  const bool failed = e.first_dead_rank >= 0 || crash_record(e) ||
                      (e.first_event && is_failure_report(*e.first_event, e.forwarded_signal));
  if (e.preemption_forwarded && !failed) {
    c.preemption_requested = true;
    if (e.preempt_deadline_passed) {
      c.outcome = Outcome::Hang;
      c.summary =
          "the ranks did not finish the emergency checkpoint within --preempt-grace after a preemption request (no "
          "rank exited 75) and were killed";
      return c;
    }
    // E.g. the forwarded signal killed ranks that had not installed their handlers yet (docs/worker-protocol.md).
    c.outcome = Outcome::Preempted;
    c.summary = "no rank confirmed an emergency checkpoint (none exited 75; the process manager ";
    c.summary += e.manager_signal != 0 ? "was killed by " + signal_text(e.manager_signal)
                                       : "exited with code " + std::to_string(e.manager_exit_code);
    c.summary += "): the run resumes from the newest committed checkpoint";
    return c;
  }
  c = classify_failure(e);
  if (e.preemption_forwarded) {
    c.preemption_requested = true;
    c.summary += ", during the emergency checkpoint after a preemption request (no rank confirmed the checkpoint)";
  }
  return c;
}

bool is_failure_report(const FailureEvent& event, int forwarded_signal) {
  switch (event.kind) {
    case FailureEvent::Kind::Signal:
      return event.value != forwarded_signal || forwarded_signal == 0;
    case FailureEvent::Kind::ExitCode:
      return event.value != kExitSuccess && event.value != kExitPreempted;
    case FailureEvent::Kind::NodeLost:
    case FailureEvent::Kind::Refused:
      return true;
  }
  return true;
}

Decision decide(const Options& options, const Classification& c, int failed_restarts, const ProgressState& progress) {
  switch (c.outcome) {
    case Outcome::Success:
      return {Decision::Action::Finish, kExitSuccess, {}, "run complete"};
    case Outcome::Usage:
      return {Decision::Action::Stop, kExitUsage, {}, "usage errors are never retried"};
    case Outcome::Preempted:
      return {Decision::Action::Stop,
              kExitPreempted,
              {},
              "preempted: run the same command again (or let Slurm requeue the job) to resume"};
    default:
      break;
  }
  if (progress.streak >= options.no_progress_limit) {
    const std::string best = progress.best >= 0 ? std::to_string(progress.best) : "none";
    const std::string what =
        progress.basis == ProgressBasis::Checkpoint
            ? " consecutive attempts committed no new checkpoint (newest committed step " + best + ")"
            : " consecutive attempts reached no new highest step (highest step " + best +
                  "; without --checkpoint-dir progress is judged from heartbeats)";
    return {Decision::Action::Stop,
            kExitNoProgress,
            {},
            "restart loop: " + std::to_string(progress.streak) + what + " (--no-progress-limit " +
                std::to_string(options.no_progress_limit) + "); fix the cause above before running again"};
  }
  if (failed_restarts >= options.max_restarts) {
    return {Decision::Action::Stop,
            kExitGaveUp,
            {},
            "gave up: --max-restarts " + std::to_string(options.max_restarts) +
                " relaunches used; raise it or fix the cause above"};
  }
  if (c.preemption_requested) {
    // Relaunching now would ignore the request to stop; the next run resumes, with this failure counted.
    return {Decision::Action::Stop,
            kExitPreempted,
            {},
            "preempted, and the emergency checkpoint failed (counted as a failure): run the same command again (or let "
            "Slurm requeue the job) to resume from the newest committed checkpoint"};
  }
  // The wait protects against a crash loop, not against failures as such: an attempt that committed a new checkpoint
  // (progress.streak == 0) is relaunched at once, and only attempts in a row without progress wait, doubling each
  // time. Waiting after every failure cost a run with frequent failures more than its rollback did.
  std::chrono::milliseconds backoff{0};
  if (progress.streak > 0) {
    backoff = options.backoff;
    for (int i = 1; i < progress.streak && backoff < options.backoff_max; ++i)
      backoff *= 2;
    backoff = std::min(backoff, options.backoff_max);
  }
  return {Decision::Action::Retry, 0, backoff,
          "relaunch " + std::to_string(failed_restarts + 1) + " of " + std::to_string(options.max_restarts) +
              (progress.streak > 0                           ? ""
               : progress.basis == ProgressBasis::Checkpoint ? " (the attempt committed a new checkpoint)"
                                                             : " (the attempt reached a new highest step)")};
}

}  // namespace tenax::launch
