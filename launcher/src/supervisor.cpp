#include "supervisor.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "attempt_plan.hpp"
#include "attempt_runner.hpp"
#include "bad_nodes.hpp"
#include "checkpoint_scan.hpp"
#include "classify.hpp"
#include "core/directory_lock.hpp"
#include "core/json.hpp"
#include "launcher_signals.hpp"
#include "ledger.hpp"
#include "mpi_shm_dir.hpp"
#include "node_local_cleanup.hpp"
#include "node_probe.hpp"
#include "output_pump.hpp"
#include "processes.hpp"
#include "restart_progress.hpp"
#include "slurm.hpp"
#include "tenax/error.hpp"
#include "tenax/runtime.hpp"

namespace tenax::launch {
namespace {

// How long a node's slurmd gets to accept a connection after a failure: a reachable node answers in well under a
// millisecond, an unreachable one leaves ARP (about 3 s) or the SYN unanswered.
constexpr std::chrono::milliseconds kNodeProbeTimeout{2000};

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string absolute(const std::string& path) {
  if (path.empty()) return path;
  return std::filesystem::absolute(path).lexically_normal().string();
}

std::string fixed(double value, int digits = 2) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

// Why `dir` cannot take the ranks' records ("" when it can): a probe the size of a few dozen heartbeat files is
// written, flushed and removed. A run directory that filled up makes every rank lose its heartbeats and exit record,
// so its attempts look like crashes, and a relaunch would fail the same way.
std::string run_dir_write_problem(const std::string& dir) {
  const std::string probe = dir + "/.space-probe-" + std::to_string(getpid());
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return std::strerror(errno);
  const std::string block(64 * 1024, '\0');
  std::string problem;
  for (std::size_t done = 0; done < block.size() && problem.empty();) {
    const ssize_t n = write(fd, block.data() + done, block.size() - done);
    if (n < 0 && errno != EINTR) problem = std::strerror(errno);
    if (n == 0) problem = std::strerror(ENOSPC);  // a regular file that takes nothing more is full
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  if (problem.empty() && fsync(fd) != 0) problem = std::strerror(errno);
  close(fd);
  unlink(probe.c_str());
  return problem;
}

// Sleeps for `duration`, waking early when a preemption signal arrives. Returns false when one did.
bool wait_unless_signalled(std::chrono::milliseconds duration) {
  auto until = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < until) {
    if (received_signal() != 0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return received_signal() == 0;
}

class Supervisor {
 public:
  explicit Supervisor(const Options& options)
      : options_(options),
        run_dir_(absolute(options.run_dir)),
        checkpoint_dir_(absolute(options.checkpoint_dir)),
        slurm_(options.mode == Mode::Slurm) {
    if (slurm_) {
      job_ = read_slurm_job();
      job_id_ = job_.job_id;
      // Fail now, before anything starts (or is created), when the options cannot fit the allocation.
      const AttemptPlan first = plan_slurm_attempt(options_, job_.nodes, {});
      if (const std::string problem = tasks_fit_allocation(options_, first.nodes, first.tasks_per_node, job_);
          !problem.empty())
        throw UsageError(problem);
    }
    std::error_code error;
    std::filesystem::create_directories(run_dir_, error);
    if (error) throw UsageError("--run-dir '" + run_dir_ + "' cannot be created: " + error.message());
    if (access(run_dir_.c_str(), W_OK) != 0) throw UsageError("--run-dir '" + run_dir_ + "' is not writable");
    // Before anything in them is read or written (the ledger's repair included): one launcher per directory.
    run_dir_lock_ = DirectoryLock::take(run_dir_, {"--run-dir", "give this one another --run-dir", ""}, lock_owner(),
                                        kEarlierRunLockWait);
    if (!run_dir_lock_.warning().empty()) announce("warning: " + run_dir_lock_.warning());
    if (!checkpoint_dir_.empty()) {
      std::filesystem::create_directories(checkpoint_dir_, error);
      if (error) throw UsageError("--checkpoint-dir '" + checkpoint_dir_ + "' cannot be created: " + error.message());
      if (!std::filesystem::equivalent(checkpoint_dir_, run_dir_, error)) {
        checkpoint_dir_lock_ =
            DirectoryLock::take(checkpoint_dir_, {"--checkpoint-dir", "give this one another --checkpoint-dir", ""},
                                lock_owner(), kEarlierRunLockWait);
        if (!checkpoint_dir_lock_.warning().empty()) announce("warning: " + checkpoint_dir_lock_.warning());
      }
    }
    ledger_.emplace(run_dir_ + "/ledger.jsonl");
    if (!ledger_->repair_note().empty()) announce("warning: " + ledger_->repair_note());
    bad_nodes_.emplace(run_dir_ + "/bad-nodes.txt");
  }

  int run() {
    const auto& history = ledger_->history();
    // Numbered after every attempt the ledger records (records of older launchers carry no number: counted).
    attempt_ = std::max(history.attempts, history.last_attempt);
    if (const int started = highest_heartbeat_attempt(run_dir_); started > attempt_) {
      announce("warning: attempt " + std::to_string(started) +
               " has no record in the ledger (its launcher ended without writing one: killed outright, e.g. by "
               "SIGKILL, or unable to write the ledger): the attempts go on from " +
               std::to_string(started + 1));
      attempt_ = started;
    }
    failed_restarts_ = history.failed_restarts;
    progress_ = history.progress;
    if (!checkpoint_dir_.empty()) {
      try {
        progress_.start_from(newest_committed_checkpoint(checkpoint_dir_));
      } catch (const IoError&) {
        // judged as before: by what the attempts leave
      }
    }
    append_start();
    announce("run directory " + run_dir_ +
             (attempt_ ? ", resuming after " + std::to_string(attempt_) + " earlier attempt(s)" : ""));
    while (true) {
      if (received_signal() != 0) {
        const std::string reason = "preempted before the next attempt started";
        return finish(kExitPreempted, slurm_ ? requeue(reason) : reason);
      }
      // The directories' locks, still ours: a directory removed or emptied by hand took its lock file away.
      if (!keep_locks()) return finish(kExitUsage, lock_lost_);
      AttemptPlan plan;
      try {
        plan = slurm_ ? plan_slurm_attempt(options_, job_.nodes, bad_nodes_->excluded()) : plan_local_attempt(options_);
      } catch (const UsageError&) {
        throw;
      } catch (const Error& error) {
        return finish(kExitGaveUp, error.what());
      }
      plan.attempt = ++attempt_;
      observed_mtbf(plan);
      plan.restart_count = attempt_ - 1;
      plan.job_id = job_id_;
      Command command = slurm_ ? srun_command(options_, plan, run_dir_, checkpoint_dir_)
                               : local_command(options_, plan, run_dir_, checkpoint_dir_);
      // The ranks' shared-memory files in a folder of this attempt's, removed once it has ended, killed ranks' too
      // (mpi_shm_dir.hpp). Only where every rank is on this host: the folder exists on no other.
      std::optional<MpiShmDir> shm_dir;
      if (!slurm_ && !may_span_hosts(options_.extra_launcher_args)) {
        shm_dir.emplace();
        for (const std::string& removed : shm_dir->removed_leftovers())
          announce("removed an earlier launcher's shared-memory folder " + removed);
        if (!shm_dir->path().empty())
          command.env_defaults.emplace_back("OMPI_MCA_btl_vader_backing_directory", shm_dir->path());
      }
      std::string start_line =
          "attempt " + std::to_string(plan.attempt) + ": starting " + std::to_string(plan.world_size) + " ranks";
      if (plan.original_world_size) {
        start_line += " (data parallelism shrunk from " + std::to_string(plan.original_world_size) + " ranks)";
      }
      if (!plan.exclude.empty()) start_line += ", excluding " + join(plan.exclude, ",");
      announce(start_line + ": " + join(command.argv, " "));

      const std::int64_t newest_before = newest_in_checkpoint_dir();
      AttemptReport report = run_attempt(options_, plan, command, run_dir_,
                                         slurm_ ? NodeProber([this] { return probe_nodes_now(); }) : NodeProber(),
                                         [this] { return keep_locks(); });
      Classification classified = classify(report.evidence);
      const bool failed = classified.outcome != Outcome::Success && classified.outcome != Outcome::Usage &&
                          classified.outcome != Outcome::Preempted;
      // After the teardown too: a crash or a peer failure is probed only now, and a node may have gone meanwhile.
      if (failed && slurm_ && classified.outcome != Outcome::NodeLost) {
        const NodeProbeResult probed = probe_nodes_now();
        report.evidence.unreachable_nodes = probed.unreachable;
        report.evidence.slow_nodes = probed.slow;
        if (!probed.unreachable.empty() || !probed.slow.empty()) classified = classify(report.evidence);
      }
      const std::int64_t committed = newest_committed_step(report);
      // Heartbeats are written once per interval, so the last one read may lag the ranks; a checkpoint this attempt
      // committed (newer than any before it) proves its step was reached ("reached step 534, checkpoint step 560"
      // said otherwise). An attempt that reported no step keeps none.
      if (report.max_step >= 0 && committed > report.max_step && committed > newest_before) report.max_step = committed;
      progress_.record(progress_basis_, {report.max_step, committed}, failed);
      // A program that reports no steps (not a tenax worker, or one that failed before its first) shows as such,
      // not as step -1.
      announce("attempt " + std::to_string(plan.attempt) + " " + outcome_name(classified.outcome) + ": " +
               classified.summary + " (" +
               (report.max_step < 0 ? "no step reported" : "reached step " + std::to_string(report.max_step)) + ", " +
               (committed < 0 ? "no checkpoint" : "checkpoint step " + std::to_string(committed)) + ")");

      if (failed) {
        if (const std::string problem = run_dir_write_problem(run_dir_); !problem.empty()) {
          const std::string reason = "the run directory '" + run_dir_ + "' cannot be written (" + problem +
                                     "): the ranks' heartbeats and exit records are lost there, so this attempt's "
                                     "outcome is unknown and a relaunch would fail the same way; free space on its "
                                     "file system or give another --run-dir";
          announce(reason);  // before finish(), whose ledger record may not fit either
          return finish(kExitGaveUp, reason);
        }
      }
      if (failed && slurm_ && !classified.node.empty()) blame_node(classified);
      Decision decision = decide(options_, classified, failed_restarts_, progress_.state(progress_basis_));
      if (decision.action == Decision::Action::Retry) ++failed_restarts_;
      append_attempt(plan, report, committed, classified, decision);
      if (decision.action != Decision::Action::Retry) {
        if (decision.exit_code == kExitPreempted && slurm_) {
          return finish(decision.exit_code, requeue(decision.reason));
        }
        return finish(decision.exit_code, decision.reason);
      }
      announce("decision: " + decision.reason + " after " + fixed(decision.backoff.count() / 1000.0, 1) +
               " s backoff, from the newest checkpoint");
      const auto backoff_start = std::chrono::steady_clock::now();
      if (!wait_unless_signalled(decision.backoff)) {
        // The attempt record (written first, so that a launcher killed now still leaves it) planned the whole
        // backoff: the end record says how much of it was not waited.
        const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - backoff_start).count();
        const std::string reason = "preempted during the backoff; the newest checkpoint is kept";
        return finish(kExitPreempted, slurm_ ? requeue(reason) : reason,
                      std::max(0.0, decision.backoff.count() / 1000.0 - waited));
      }
    }
  }

 private:
  // The checkpoint a restart would resume from: the newest committed one in the checkpoint directory, or the newest
  // the ranks reported (a program with its own checkpoint layout reports commits through its heartbeats, late by up
  // to one heartbeat interval; the step it resumed from is committed too, 0 for a fresh start).
  // The newest committed checkpoint in --checkpoint-dir, -1 when none or unreadable.
  std::int64_t newest_in_checkpoint_dir() const {
    if (checkpoint_dir_.empty()) return -1;
    try {
      return newest_committed_checkpoint(checkpoint_dir_);
    } catch (const IoError&) {
      return -1;
    }
  }

  std::int64_t newest_committed_step(const AttemptReport& report) {
    std::int64_t step = std::max(report.checkpoint_step, report.resumed_step);
    if (checkpoint_dir_.empty()) return step;
    try {
      step = std::max(step, newest_committed_checkpoint(checkpoint_dir_));
    } catch (const IoError& error) {
      announce(std::string("warning: ") + error.what() + "; judging the attempt by the checkpoints its ranks reported");
    }
    return step;
  }

  // A crash, a peer failure or a hang may be the first sign of a node that is gone or whose link is degraded: the
  // nodes of the allocation not excluded yet whose slurmd no longer accepts a connection, or accepts it far slower
  // than the others' (node_probe.hpp), evidence for classify().
  NodeProbeResult probe_nodes_now() {
    std::vector<std::string> candidates;
    const std::set<std::string> excluded = bad_nodes_->excluded();
    for (const std::string& node : job_.nodes)
      if (!excluded.count(node)) candidates.push_back(node);
    std::string note;
    NodeProbeResult probed = probe_slurm_nodes(options_, candidates, kNodeProbeTimeout, &note);
    if (!note.empty()) announce("warning: could not probe the nodes after the failure: " + note);
    if (!probed.unreachable.empty())
      announce("no connection to the slurmd of " + join(probed.unreachable, ", ") + " after the failure");
    for (const SlowNode& slow : probed.slow)
      announce("the slurmd of " + slow.node + " answered only after " + fixed(slow.answer_ms, 1) +
               " ms (the nodes' median " + fixed(slow.typical_ms, 1) + " ms)");
    return probed;
  }

  // The run's mean time between failures so far, across attempts and requeues (the ledger's wall time over its
  // failures), and between the failures whose restart needed the shared tier. Those not resumed from yet (the one
  // this attempt follows) count as needing it, and at least one is counted: the next failure may be the first. Both 0
  // before the first failure, or when the ledger cannot be read (the program then assumes TENAX_MTBF).
  void observed_mtbf(AttemptPlan& plan) {
    try {
      const GoodputSummary summary = summarize_ledger(ledger_->path());
      if (summary.failures == 0) return;
      plan.observed_mtbf_s = summary.wall_s / summary.failures;
      plan.observed_shared_mtbf_s =
          summary.wall_s / std::max(1, summary.shared_tier_recoveries + summary.unresumed_failures);
    } catch (const Error&) {
    }
  }

  void blame_node(const Classification& classified) {
    const bool excluded_now =
        bad_nodes_->blame(classified.node, std::string(outcome_name(classified.outcome)) + ": " + classified.summary,
                          classified.node_lost, options_.bad_node_strikes);
    announce("node " + classified.node + (excluded_now ? " excluded from later attempts" : " gets a strike") + " (" +
             std::to_string(bad_nodes_->strikes(classified.node)) + " of " + std::to_string(options_.bad_node_strikes) +
             "; list in " + bad_nodes_->path() + ")");
  }

  // Returns `reason` for the end record, with the requeue's failure added when it failed (the job will then not come
  // back by itself, which the ledger and the last line must say).
  std::string requeue(const std::string& reason) {
    // `scancel` sends the same SIGTERM as a time limit or a preemption, but asks for the job's end: requeueing it
    // would bring it back (and again after every further scancel) until it finished its training. Asked first, so
    // that the end record says so with --no-requeue too.
    cancelled_ = job_cancelled(job_.job_id).value_or(false);
    if (!options_.requeue) {
      announce("not requeueing (--no-requeue)");
      return reason;
    }
    if (cancelled_) {
      const std::string note = "Slurm job " + job_.job_id +
                               " was cancelled (scancel): not requeued; the emergency checkpoint is kept: submit the "
                               "job again (the same command) to resume from it";
      announce(note);
      return reason + "; " + note;
    }
    bool already = false;
    const std::string problem = requeue_job(options_, job_.job_id, &already);
    if (problem.empty()) {
      announce(already
                   ? "Slurm job " + job_.job_id + " is already requeued (pending execution): it comes back by itself"
                   : "requeued Slurm job " + job_.job_id);
      return reason;
    }
    const std::string failure = "requeue of Slurm job " + job_.job_id + " failed: " + problem;
    announce(failure);
    return reason + "; " + failure;
  }

  void append_start() {
    json::ObjectWriter line;
    line.add("event", "start").add("time", unix_now()).add("invocation", ledger_->history().invocations + 1);
    line.add("mode", slurm_ ? "slurm" : "local")
        .add("ranks", options_.ranks)
        .add("program", ledger_text(join(options_.program, " ")));
    if (slurm_) {
      line.add("slurm_job_id", ledger_text(job_.job_id)).add("slurm_restart_count", job_.restart_count);
    } else {
      line.add_null("slurm_job_id").add("slurm_restart_count", 0);
    }
    ledger_->append(line.str());
  }

  void append_attempt(const AttemptPlan& plan, const AttemptReport& r, std::int64_t saved, const Classification& c,
                      const Decision& d) {
    // Work lost: steps past the newest checkpoint, at this attempt's mean step time. Nothing is lost on success,
    // and a preemption loses nothing when the emergency checkpoint was taken at the last step.
    double step_time = r.steps_done > 0 ? r.productive_s / static_cast<double>(r.steps_done) : 0;
    double work_lost = 0;
    if (c.outcome != Outcome::Success && saved >= 0 && r.max_step > saved) {
      work_lost = std::min(r.productive_s, step_time * static_cast<double>(r.max_step - saved));
    }
    json::ObjectWriter line;
    line.add("event", "attempt").add("invocation", ledger_->history().invocations + 1).add("attempt", plan.attempt);
    line.add("world_size", plan.world_size).add("start", r.start_unix).add("end", r.end_unix);
    line.add("wall_s", r.end_unix - r.start_unix).add("outcome", outcome_name(c.outcome));
    line.add("manager_exit", r.evidence.manager_exit_code).add("manager_signal", r.evidence.manager_signal);
    line.add("rank", c.rank).add("node", ledger_text(c.node)).add("summary", ledger_text(c.summary));
    line.add("resumed_step", static_cast<long long>(r.resumed_step))
        .add("max_step", static_cast<long long>(r.max_step));
    if (!r.resumed_tier.empty()) line.add("resumed_tier", r.resumed_tier);
    line.add("checkpoint_step", static_cast<long long>(saved)).add("steps_done", static_cast<long long>(r.steps_done));
    line.add("progress_by", progress_basis_name(progress_basis_));
    auto add_time = [&](const char* key, double unix_time) {
      if (unix_time >= 0) {
        line.add(key, unix_time);
      } else {
        line.add_null(key);
      }
    };
    add_time("ready", r.ready_unix);
    add_time("first_step", r.first_step_unix);
    add_time("failure_noticed", r.noticed_unix);
    line.add("productive_s", r.productive_s).add("checkpoint_stall_s", r.checkpoint_stall_s);
    line.add("final_checkpoint_s", r.final_checkpoint_s);
    line.add("shared_saves", static_cast<long long>(r.shared_saves))
        .add("local_saves", static_cast<long long>(r.local_saves));
    line.add("relaunch_s", r.relaunch_s).add("load_s", r.load_s).add("detect_s", r.detect_s);
    line.add("teardown_s", r.teardown_s).add("work_lost_s", work_lost);
    line.add("backoff_s", d.action == Decision::Action::Retry ? d.backoff.count() / 1000.0 : 0.0);
    line.add("hang_timeout_s", r.hang_timeout_s).add("decision", ledger_text(d.reason));
    ledger_->append(line.str());
  }

  int finish(int exit_code, const std::string& reason, double backoff_unused_s = 0) {
    json::ObjectWriter line;
    line.add("event", "end").add("time", unix_now()).add("invocation", ledger_->history().invocations + 1);
    line.add("exit_code", exit_code).add("reason", ledger_text(reason));
    // Resubmitted, the run starts with fresh limits and the wait before it is not counted as a requeue's.
    if (cancelled_) line.add("cancelled", true);
    if (backoff_unused_s > 0) line.add("backoff_unused_s", backoff_unused_s);
    ledger_->append(line.str());
    // A finished run needs its node-local copies no more, nor does a Slurm job (a requeued job restarts from the shared
    // tier, on whichever nodes it gets, and the job's end removes them on every node). A run outside Slurm that
    // stopped unfinished (gave up, a usage error, a divergence, a preemption) resumes from them when the same command
    // runs again: they stay, and the last lines say where.
    if (exit_code == 0 || std::getenv("SLURM_JOB_ID") != nullptr) {
      if (const std::string removed = remove_node_local_copies(job_id_); !removed.empty()) announce(removed);
    } else if (const std::string kept = kept_node_local_copies(job_id_); !kept.empty()) {
      announce(kept);
    }
    GoodputSummary summary = summarize_ledger(ledger_->path());
    announce((exit_code == 0 ? "done: " : "stopping (exit " + std::to_string(exit_code) + "): ") + reason);
    write_all_to(STDERR_FILENO, "tenax-launch: " + format_summary(summary));
    return exit_code;
  }

  // DirectoryLock::renew for both directories; false (the reason in lock_lost_, said once) when another launcher took
  // one of them.
  bool keep_locks() {
    for (DirectoryLock* lock : {&run_dir_lock_, &checkpoint_dir_lock_}) {
      try {
        if (const std::string note = lock->renew(lock_owner()); !note.empty()) announce("warning: " + note);
      } catch (const UsageError& error) {
        if (lock_lost_.empty()) {
          lock_lost_ = error.what();
          announce(lock_lost_);
        }
        return false;
      }
    }
    return true;
  }

  // Who this launcher is, for the directory locks: the Slurm job and its restart count (also in local mode inside an
  // allocation, which Slurm requeues as well), so that a requeued job recognises a lock its earlier run left.
  LockOwner lock_owner() const {
    if (slurm_) return {job_.job_id, job_.restart_count};
    return lock_owner_from_environment(LockRole::Launcher);
  }

  const Options& options_;
  const std::string run_dir_;
  const std::string checkpoint_dir_;
  const bool slurm_;
  DirectoryLock run_dir_lock_;  // before the ledger: released only after the ledger's last record
  DirectoryLock checkpoint_dir_lock_;
  std::string lock_lost_;  // why a directory is no longer this launcher's ("" while both are)
  std::optional<Ledger> ledger_;
  std::optional<BadNodes> bad_nodes_;
  SlurmJob job_;
  // Slurm's job id inside a Slurm job, also in local mode (the plugin's job epilog then removes the node-local copies
  // even when tenax-launch itself is killed); else an id of this invocation's own.
  std::string job_id_ =
      std::getenv("SLURM_JOB_ID") && *std::getenv("SLURM_JOB_ID") ? std::getenv("SLURM_JOB_ID") : new_local_job_id();
  int attempt_ = 0;
  int failed_restarts_ = 0;
  bool cancelled_ = false;  // the Slurm job was cancelled by scancel: not requeued, recorded in the end record
  // Without a checkpoint directory the launcher cannot see commits: progress is then the highest heartbeat step.
  const ProgressBasis progress_basis_ = checkpoint_dir_.empty() ? ProgressBasis::Heartbeat : ProgressBasis::Checkpoint;
  ProgressTracker progress_;
};

}  // namespace

int supervise(const Options& options) {
  install_launcher_signal_handlers();
  become_subreaper();
  Supervisor supervisor(options);
  return supervisor.run();
}

}  // namespace tenax::launch
