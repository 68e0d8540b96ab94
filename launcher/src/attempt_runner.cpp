#include "attempt_runner.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "hang_detector.hpp"
#include "heartbeats.hpp"
#include "launcher_signals.hpp"
#include "output_pump.hpp"
#include "processes.hpp"
#include "tenax/error.hpp"
#include "tenax/runtime.hpp"

namespace tenax::launch {
namespace {

double mono_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
double seconds(std::chrono::milliseconds ms) {
  return static_cast<double>(ms.count()) / 1000.0;
}

constexpr int kPollMs = 25;
// How long the ranks and mpirun may take to exit by themselves once every rank's exit record says 75 (measured: under
// 0.1 s after the records when mpirun does not wait; see end_abort_wait).
constexpr double kExitGraceAfterPreemptionS = 0.5;

// A rank exited 75: the emergency checkpoint is committed on every rank (docs/worker-protocol.md).
bool any_confirmed_preemption(const std::vector<Heartbeat>& beats) {
  return std::any_of(beats.begin(), beats.end(),
                     [](const Heartbeat& h) { return h.exit_code == tenax::kExitPreempted; });
}

class AttemptWatch {
 public:
  AttemptWatch(const Options& options, const AttemptPlan& plan, const std::string& run_dir, const NodeProber& probe,
               const LockKeeper& keep_locks)
      : options_(options),
        plan_(plan),
        run_dir_(run_dir),
        probe_(probe),
        keep_locks_(keep_locks),
        local_(options.mode == Mode::Local),
        start_mono_(mono_now()),
        unix_offset_(unix_now() - start_mono_),
        detector_(hang_settings(options), plan.world_size, start_mono_) {}

  AttemptReport run(const Command& command) {
    report_.start_unix = unix_now();
    for (const std::string& warning : prepare_heartbeats(run_dir_, plan_.attempt))
      announce("warning: " + warning);
    Spawned child = spawn(command.argv, command.env, command.env_defaults);
    manager_pid_ = child.pid;
    OutputPump pump(child.stdout_fd, child.stderr_fd);
    double manager_done_since = -1;
    while (true) {
      auto event = pump.pump(manager_done_ ? 5 : kPollMs);
      const double now = mono_now();
      if (event && !report_.evidence.first_event) on_event(*event, now);
      for (const auto& reaped : reap_exited()) {
        if (reaped.pid != manager_pid_) continue;
        manager_done_ = true;
        if (WIFEXITED(reaped.status)) {
          report_.evidence.manager_exit_code = WEXITSTATUS(reaped.status);
        } else if (WIFSIGNALED(reaped.status)) {
          report_.evidence.manager_signal = WTERMSIG(reaped.status);
        }
      }
      observe_heartbeats(now);
      if (keep_locks_ && now - locks_checked_ >= 1.0) {
        locks_checked_ = now;
        if (!keep_locks_() && teardown_start_ < 0) {
          notice(now, -1);
          begin_teardown(now, /*at_once=*/true, "another tenax-launch took a directory of this run");
        }
      }
      if (local_ && noticed_ < 0 && phase_ != Phase::TearingDown) find_dead_ranks(now);
      if (local_ && !manager_done_) end_abort_wait(now);
      step_state_machine(now);
      if (manager_done_) {
        // The attempt is over when nothing of it is left: the process manager reaped, every descendant gone and
        // the output drained (a rank orphaned by a dead mpirun still counts, it is ours as subreaper).
        if (manager_done_since < 0) manager_done_since = now;
        bool nothing_left = descendants().empty();
        if (nothing_left && (pump.drained() || now - manager_done_since > 1.0)) break;
        if (!nothing_left && teardown_start_ < 0 && now - manager_done_since > 0.5) {
          begin_teardown(now, /*at_once=*/false, "processes left behind by the process manager");
        }
      }
    }
    const double end = mono_now();
    observe_heartbeats(end);
    report_.evidence.lost_nodes = pump.lost_nodes();
    report_.end_unix = end + unix_offset_;
    report_.teardown_s = noticed_ >= 0 ? end - noticed_ : 0;
    finish_report();
    return report_;
  }

 private:
  enum class Phase { Running, Preempting, TearingDown };

  void notice(double now, int culprit_rank) {
    if (noticed_ >= 0) return;
    noticed_ = now;
    report_.noticed_unix = now + unix_offset_;
    double last_sign = culprit_rank >= 0 ? detector_.last_beat_s(culprit_rank) : -1;
    report_.detect_s = last_sign >= 0 ? std::max(0.0, now - last_sign) : 0;
  }

  void on_event(const FailureEvent& event, double now) {
    // mpirun's "Exit code: 0" style reports and a rank's orderly exit are not failures.
    if (event.kind == FailureEvent::Kind::ExitCode && event.value == 0) return;
    report_.evidence.first_event = event;
    if (phase_ == Phase::Running) notice(now, event.rank);
    // During the emergency checkpoint: a rank killed or failed before any rank confirmed the checkpoint means it
    // cannot complete (docs/launcher.md, Preemption).
    if (phase_ == Phase::Preempting && is_failure_report(event, report_.evidence.forwarded_signal) &&
        !any_confirmed_preemption(beats_)) {
      notice(now, event.rank);
    }
  }

  void observe_heartbeats(double now) {
    try {
      beats_ = read_heartbeats(run_dir_, plan_.attempt);
    } catch (const IoError& error) {
      if (!heartbeat_error_reported_) announce(std::string("warning: ") + error.what());
      heartbeat_error_reported_ = true;
      return;
    }
    detector_.observe(beats_, now);
    if (report_.ready_unix < 0 && detector_.first_beat_s() >= 0) {
      report_.ready_unix = detector_.first_beat_s() + unix_offset_;
    }
    if (report_.first_step_unix < 0 && detector_.first_step_s() >= 0) {
      report_.first_step_unix = detector_.first_step_s() + unix_offset_;
    }
  }

  // Local mode: a rank whose process is gone without an exit record died (killed, crashed). Seen within one poll,
  // long before mpirun reports it. While preempting, only until a rank confirms the emergency checkpoint (exit 75):
  // the process manager then kills the others, which is no failure.
  void find_dead_ranks(double now) {
    if (phase_ == Phase::Preempting && any_confirmed_preemption(beats_)) return;
    std::vector<int> candidates;
    for (const auto& h : beats_) {
      if (h.exit_code < 0 && h.pid > 0 && !process_alive(static_cast<pid_t>(h.pid))) candidates.push_back(h.rank);
    }
    if (candidates.empty()) return;
    // Re-read: the rank may have written its exit record and exited between the read and the check.
    std::vector<Heartbeat> fresh;
    try {
      fresh = read_heartbeats(run_dir_, plan_.attempt);
    } catch (const IoError&) {
      return;
    }
    if (phase_ == Phase::Preempting && any_confirmed_preemption(fresh)) return;
    for (int rank : candidates) {
      for (const auto& h : fresh) {
        if (h.rank == rank && h.exit_code < 0) {
          report_.evidence.first_dead_rank = rank;
          notice(now, rank);
          return;
        }
      }
    }
  }

  // Every rank's exit record says 75: the emergency checkpoint is committed and each rank is done (finish() is its
  // last call, docs/worker-protocol.md). mpirun takes the first non-zero exit for an abort and then waits Open MPI's
  // odls_base_sigkill_timeout (1 s) once or twice, and ranks that have not exited yet stay alive through it (waiting
  // for every rank to be gone never cut the wait short). Measured with a bare MPI program whose 4 ranks leave
  // MPI_Finalize together: mpirun took 0.39-0.41 s with exit code 0 every time, 0.39 s, 1.40 s or 2.40 s with 75; the
  // GPT under tenax-launch ended 1.1-2.1 s after SIGTERM in 2 of 15 preemptions (0.11-0.16 s in the others, the exit
  // records 0.02-0.07 s after it), and 3 of the goodput benchmark's 16 preempted attempts ended 1-2 s late. So the
  // attempt ends a grace after the last record, whatever is left.
  // Only for 75: a success is judged by mpirun's own exit code, which must not be a kill.
  void end_abort_wait(double now) {
    const bool all_preempted = static_cast<int>(beats_.size()) == plan_.world_size &&
                               std::all_of(beats_.begin(), beats_.end(),
                                           [](const Heartbeat& h) { return h.exit_code == tenax::kExitPreempted; });
    if (!all_preempted) return;
    if (all_preempted_since_ < 0) all_preempted_since_ = now;
    if (now - all_preempted_since_ >= kExitGraceAfterPreemptionS)
      begin_teardown(now, /*at_once=*/true, "every rank exited 75: nothing of the attempt is left to wait for");
  }

  void step_state_machine(double now) {
    const int signo = received_signal();
    if (signo != 0 && phase_ == Phase::Running && !manager_done_) {
      phase_ = Phase::Preempting;
      preempt_deadline_ = now + seconds(options_.preempt_grace);
      report_.evidence.preemption_forwarded = true;
      // mpirun turns SIGTERM into killing the job; SIGUSR1 it forwards to every rank. srun forwards SIGTERM/SIGUSR1.
      const int forwarded = local_ ? SIGUSR1 : (signo == SIGINT ? SIGTERM : signo);
      report_.evidence.forwarded_signal = forwarded;
      kill(manager_pid_, forwarded);
      announce("received " + signal_name(signo) + ": forwarded " + signal_name(forwarded) +
               " to the ranks; waiting up to " + std::to_string(options_.preempt_grace.count() / 1000) +
               " s for the emergency checkpoint");
    }
    if (phase_ == Phase::Running) {
      if (noticed_ >= 0) {
        begin_teardown(now, /*at_once=*/true, "failure");
      } else if (auto verdict = detector_.check(now); verdict && !manager_done_) {
        report_.evidence.hang = *verdict;
        notice(now, verdict->ranks.empty() ? -1 : verdict->ranks.front());
        if (verdict->kind == HangVerdict::Kind::Stalled) report_.detect_s = now - detector_.last_progress_s();
        announce("hang detected: " + verdict->description);
        if (probe_ && verdict->silent_nodes.empty()) probe_nodes_before_teardown();
        begin_teardown(now, /*at_once=*/false, "hang");
      } else if (manager_done_ && report_.evidence.manager_exit_code != 0) {
        notice(now, -1);
      }
    } else if (phase_ == Phase::Preempting && noticed_ >= 0) {
      begin_teardown(now, /*at_once=*/true, "failure during the emergency checkpoint");
    } else if (phase_ == Phase::Preempting && now > preempt_deadline_ && !manager_done_) {
      announce("the ranks did not exit within --preempt-grace: killing the attempt");
      report_.evidence.preempt_deadline_passed = true;
      begin_teardown(now, /*at_once=*/false, "preemption deadline");
    }
    if (phase_ == Phase::TearingDown && !sigkill_sent_ && now >= kill_deadline_) {
      signal_descendants(SIGKILL);
      sigkill_sent_ = true;
    }
  }

  // The probe at a hang verdict (see run_attempt): at most the probe's timeout for each of its rounds, once per
  // attempt, and only when the verdict names no node of its own.
  void probe_nodes_before_teardown() {
    const NodeProbeResult probed = probe_();
    report_.evidence.unreachable_nodes = probed.unreachable;
    report_.evidence.slow_nodes = probed.slow;
  }

  void begin_teardown(double now, bool at_once, const char* why) {
    if (teardown_start_ >= 0) return;
    phase_ = Phase::TearingDown;
    teardown_start_ = now;
    // Slurm: srun must cancel the step itself (a killed srun may leave remote tasks running), so always its abort.
    if (at_once && local_) {
      signal_descendants(SIGKILL);
      sigkill_sent_ = true;
      return;
    }
    if (!local_ && !manager_done_) {
      // srun's own abort: two SIGINTs within a second make it kill every task of the step on every node.
      kill(manager_pid_, SIGINT);
      usleep(50000);
      kill(manager_pid_, SIGINT);
    } else {
      signal_descendants(SIGTERM);
    }
    kill_deadline_ = now + seconds(options_.kill_grace);
    (void)why;
  }

  void finish_report() {
    report_.evidence.beats = beats_;
    report_.max_step = detector_.max_step();
    report_.hang_timeout_s = detector_.timeout_s();
    for (const auto& h : beats_) {
      report_.resumed_step = std::max(report_.resumed_step, h.resumed_step);
      if (h.resumed_tier == "shared" || (h.resumed_tier == "node-local" && report_.resumed_tier.empty()))
        report_.resumed_tier = h.resumed_tier;
      report_.checkpoint_step = std::max(report_.checkpoint_step, h.checkpoint_step);
      report_.steps_done = std::max(report_.steps_done, h.steps_done);
      report_.productive_s = std::max(report_.productive_s, h.productive_s);
      report_.load_s = std::max(report_.load_s, h.load_s);
      // The stalls of the rank that stalled longest, and its final checkpoint's part of them: one rank's figures.
      if (h.checkpoint_stall_s > report_.checkpoint_stall_s) {
        report_.checkpoint_stall_s = h.checkpoint_stall_s;
        report_.final_checkpoint_s = h.final_checkpoint_s;
      }
      report_.shared_saves = std::max(report_.shared_saves, h.shared_saves);
      report_.local_saves = std::max(report_.local_saves, h.local_saves);
      report_.max_step = std::max(report_.max_step, h.step);
    }
    if (report_.ready_unix >= 0) report_.relaunch_s = report_.ready_unix - report_.start_unix;
  }

  const Options& options_;
  const AttemptPlan& plan_;
  const std::string& run_dir_;
  const NodeProber& probe_;
  const LockKeeper& keep_locks_;
  double locks_checked_ = 0;
  const bool local_;
  const double start_mono_;
  const double unix_offset_;
  HangDetector detector_;
  AttemptReport report_;
  std::vector<Heartbeat> beats_;
  pid_t manager_pid_ = -1;
  bool manager_done_ = false;
  bool heartbeat_error_reported_ = false;
  Phase phase_ = Phase::Running;
  double noticed_ = -1;
  double preempt_deadline_ = 0;
  double teardown_start_ = -1;
  double kill_deadline_ = 0;
  bool sigkill_sent_ = false;
  double all_preempted_since_ = -1;  // every rank's exit record says 75 (end_abort_wait)
};

}  // namespace

HangSettings hang_settings(const Options& options) {
  return HangSettings{options.detect_hangs, seconds(options.hang_timeout), seconds(options.hang_timeout_min),
                      options.hang_factor, seconds(options.startup_timeout)};
}

AttemptReport run_attempt(const Options& options, const AttemptPlan& plan, const Command& command,
                          const std::string& run_dir, const NodeProber& probe, const LockKeeper& keep_locks) {
  AttemptWatch watch(options, plan, run_dir, probe, keep_locks);
  return watch.run(command);
}

}  // namespace tenax::launch
