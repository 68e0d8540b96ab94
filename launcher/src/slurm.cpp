#include "slurm.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>

#include "attempt_plan.hpp"
#include "processes.hpp"
#include "tenax/build_config.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"
#if TENAX_HAVE_SLURM
#include <slurm/slurm.h>

#include "tenax/hostlist.hpp"
#endif

namespace tenax::launch {
namespace {

std::string getenv_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

constexpr std::size_t kOutputLimit = 16 * 1024;  // per stream: scontrol says what is wrong in a line or two
// scontrol retries an unreachable slurmctld for about MessageTimeout (10 s by default) before giving up; Slurm's
// KillWait (30 s by default) after SIGTERM bounds how long a preempted launcher may take.
constexpr std::chrono::milliseconds kScontrolTimeLimit{20000};

// What to do about a failed `scontrol requeue`, from the Slurm error it printed (slurm_strerror's wording).
std::string requeue_fix(const CommandResult& result) {
  const std::string text = result.err + result.out;
  auto says = [&](const char* words) { return text.find(words) != std::string::npos; };
  if (result.timed_out || says("Unable to contact") || says("Socket timed out") || says("Zero Bytes")) {
    return "slurmctld did not answer; check it with `scontrol ping`";
  }
  if (says("disabled") || says("not requeue") || says("Requeue not allowed")) {
    return "the job may not be requeued: submit it with `sbatch --requeue`, and JobRequeue must not be 0 in slurm.conf";
  }
  if (says("Invalid job id") || says("Job has already finished") || says("already completing")) {
    return "the job is finished or unknown to Slurm, so it cannot be requeued";
  }
  if (says("Access/permission denied") || says("ermission denied")) {
    return "only the job's owner or a Slurm operator may requeue it; run tenax-launch as the job's user";
  }
  return "act on scontrol's message, or pass --no-requeue to skip this step";
}

}  // namespace

std::string describe_failure(const std::vector<std::string>& argv, const CommandResult& result) {
  std::string how = result.timed_out ? "was killed after " + std::to_string(kScontrolTimeLimit.count() / 1000) + " s"
                    : result.signal != 0 ? "was killed by signal " + std::to_string(result.signal)
                                         : "exited with status " + std::to_string(result.exit_code);
  // stderr first: that is where scontrol says what is wrong. Lines are joined so that the report stays one line.
  std::string text = result.err;
  if (!result.out.empty()) text += (text.empty() ? "" : "\n") + result.out;
  std::string flat;
  for (char c : text) {
    if (c == '\n') {
      if (!flat.empty() && flat.back() != ' ') flat += " | ";
    } else if (c != '\r') {
      flat += c;
    }
  }
  while (!flat.empty() && (flat.back() == ' ' || flat.back() == '|'))
    flat.pop_back();
  if (result.truncated) flat += " [output cut at " + std::to_string(kOutputLimit / 1024) + " KiB per stream]";
  return "`" + join(argv, " ") + "` " + how + (flat.empty() ? " and printed nothing" : ": " + flat);
}

SlurmJob read_slurm_job() {
  SlurmJob job;
  job.job_id = getenv_or_empty("SLURM_JOB_ID");
  if (job.job_id.empty()) {
    throw UsageError(
        "Slurm mode needs an allocation (SLURM_JOB_ID is not set): run inside sbatch/salloc, or use "
        "--mode local");
  }
  job.nodelist = getenv_or_empty("SLURM_JOB_NODELIST");
  if (job.nodelist.empty())
    throw UsageError("SLURM_JOB_ID is set but SLURM_JOB_NODELIST is not: not a Slurm job step?");
  const std::string restarts = getenv_or_empty("SLURM_RESTART_COUNT");
  if (!restarts.empty())
    job.restart_count = static_cast<int>(env::parse_int("SLURM_RESTART_COUNT", restarts, 0, INT_MAX));
#if TENAX_HAVE_SLURM
  // libslurm's own parser, as srun and the SPANK plugin use it: tenax and Slurm cannot disagree on the allocation.
  try {
    job.nodes = expand_hostlist(job.nodelist);
  } catch (const UsageError& e) {
    throw UsageError(std::string("SLURM_JOB_NODELIST: ") + e.what());
  }
  if (job.nodes.empty()) throw UsageError("SLURM_JOB_NODELIST names no node: not a Slurm job step?");
  job.cpus_per_node = expand_per_node_counts(getenv_or_empty("SLURM_JOB_CPUS_PER_NODE"), job.nodes.size());
  // An overcommitting job (sbatch -O: SLURM_OVERCOMMIT, which srun follows) holds CPUs as if for one task per node.
  if (job.cpus_per_node.size() != job.nodes.size() || !getenv_or_empty("SLURM_OVERCOMMIT").empty())
    job.cpus_per_node.clear();
  // srun's CPUs per task: SRUN_CPUS_PER_TASK, which it reads as -c. Not SLURM_CPUS_PER_TASK (the job's): srun 22.05
  // does not inherit it, and counting it would refuse steps srun runs.
  const std::string per_task = getenv_or_empty("SRUN_CPUS_PER_TASK");
  if (!per_task.empty() && per_task.size() < 6 && per_task.find_first_not_of("0123456789") == std::string::npos)
    job.cpus_per_task = std::max(1, std::stoi(per_task));
#else
  throw UsageError(
      "this tenax-launch was built without Slurm (libslurm-dev was not found), so it cannot read the "
      "allocation " +
      job.nodelist + ": rebuild it where Slurm is installed, or use --mode local");
#endif
  return job;
}

std::optional<bool> job_cancelled(const std::string& job_id) {
#if TENAX_HAVE_SLURM
  if (job_id.empty() || job_id.size() > 10 || job_id.find_first_not_of("0123456789") != std::string::npos) return {};
  const unsigned long id = std::stoul(job_id);
  if (id == 0 || id > UINT32_MAX) return {};
  // libslurm's API wants its configuration read first (slurm_init, once per process; inside a job it is there).
  static std::once_flag initialised;
  std::call_once(initialised, [] { slurm_init(nullptr); });
  // libslurm bounds its own wait for slurmctld (MessageTimeout per try), as it does scontrol's; the thread only keeps
  // a controller slower than that from holding the launcher's exit, as scontrol's 20 s limit does for the requeue.
  // Past the limit the thread is left inside libslurm, and the launcher exits without it.
  struct Answer {
    std::mutex mutex;
    std::condition_variable done;
    bool ready = false;
    std::optional<bool> cancelled;
  };
  try {
    auto answer = std::make_shared<Answer>();
    std::thread([answer, id] {
      std::optional<bool> cancelled;
      job_info_msg_t* message = nullptr;
      if (slurm_load_job(&message, static_cast<std::uint32_t>(id), SHOW_ALL) == SLURM_SUCCESS && message != nullptr) {
        for (std::uint32_t i = 0; i < message->record_count; ++i)
          if (message->job_array[i].job_id == id)
            cancelled = (message->job_array[i].job_state & JOB_STATE_BASE) == JOB_CANCELLED;
      }
      if (message != nullptr) slurm_free_job_info_msg(message);
      std::lock_guard<std::mutex> lock(answer->mutex);
      answer->cancelled = cancelled;
      answer->ready = true;
      answer->done.notify_all();
    }).detach();
    std::unique_lock<std::mutex> lock(answer->mutex);
    if (!answer->done.wait_for(lock, kScontrolTimeLimit, [&] { return answer->ready; })) return {};
    return answer->cancelled;
  } catch (const std::exception&) {
    return {};  // no thread to ask with (a pids limit, no memory): not known, as when slurmctld does not answer
  }
#else
  (void)job_id;
  return {};
#endif
}

std::vector<int> expand_per_node_counts(const std::string& text, std::size_t max_nodes) {
  std::vector<int> counts;
  auto number = [](std::string_view digits, long long max, long long* value) {
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string_view::npos)
      return false;
    *value = std::stoll(std::string(digits));
    return *value >= 1 && *value <= max;
  };
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    std::string_view item(text.data() + start, comma - start);
    long long repeat = 1, count = 0;
    if (const std::size_t paren = item.find("(x"); paren != std::string_view::npos) {
      if (!item.ends_with(')') ||
          !number(item.substr(paren + 2, item.size() - paren - 3), static_cast<long long>(max_nodes), &repeat))
        return {};
      item = item.substr(0, paren);
    }
    if (!number(item, 1 << 24, &count) || counts.size() + static_cast<std::size_t>(repeat) > max_nodes) return {};
    counts.insert(counts.end(), static_cast<std::size_t>(repeat), static_cast<int>(count));
    start = comma + 1;
  }
  return counts;
}

std::string tasks_fit_allocation(const Options& options, int nodes, int tasks_per_node, const SlurmJob& job) {
  if (job.cpus_per_node.empty()) return "";
  for (const std::string& arg : options.extra_launcher_args)
    for (const char* own : {"--overcommit", "-O", "--cpus-per-task", "-c"})
      if (arg == own || arg.starts_with(std::string(own) + "=") ||
          (std::string_view(own).size() == 2 && arg.starts_with(own)))
        return "";
  const long long needed = static_cast<long long>(tasks_per_node) * job.cpus_per_task;
  const auto fitting =
      std::count_if(job.cpus_per_node.begin(), job.cpus_per_node.end(), [&](int cpus) { return cpus >= needed; });
  if (fitting >= nodes) return "";
  const int most = *std::max_element(job.cpus_per_node.begin(), job.cpus_per_node.end());
  const std::string given = options.tasks_per_node ? "--tasks-per-node " + std::to_string(options.tasks_per_node)
                                                   : "--ranks " + std::to_string(options.ranks);
  return given + " puts " + std::to_string(tasks_per_node) + " tasks of " + std::to_string(job.cpus_per_task) +
         " CPU(s) on each of " + std::to_string(nodes) + " nodes, but the job holds " + std::to_string(needed) +
         " or more CPUs on " + std::to_string(fitting) + " of its nodes only (at most " + std::to_string(most) +
         "; SLURM_JOB_CPUS_PER_NODE=" + getenv_or_empty("SLURM_JOB_CPUS_PER_NODE") +
         "): srun would refuse the step; give fewer tasks per node, or allocate more CPUs per node (sbatch "
         "--ntasks-per-node, --cpus-per-task or --exclusive)";
}

std::vector<std::string> requeue_command(const Options& options, const std::string& job_id) {
  return {options.scontrol, "requeue", job_id};
}

std::string requeue_job(const Options& options, const std::string& job_id, bool* already) {
  if (already != nullptr) *already = false;
  const std::vector<std::string> argv = requeue_command(options, job_id);
  // Whatever went wrong, the emergency checkpoint is committed: the run can always be resumed by hand.
  const std::string keep = "; the emergency checkpoint is kept: resubmit the job (the same command) to resume from it";
  CommandResult result;
  try {
    result = run_command(argv, kOutputLimit, kScontrolTimeLimit);
  } catch (const Error& error) {
    return "`" + join(argv, " ") + "` could not be started: " + error.what() +
           " (fix: put Slurm's scontrol on PATH or pass --scontrol PATH)" + keep;
  }
  if (result.ok()) return "";
  // ESLURM_JOB_PENDING: the job is already back in the queue. Resubmitting, the advice for a real failure, would
  // start a second copy of the run.
  if ((result.err + result.out).find("Job is pending execution") != std::string::npos) {
    if (already != nullptr) *already = true;
    return "";
  }
  return describe_failure(argv, result) + " (fix: " + requeue_fix(result) + ")" + keep;
}

}  // namespace tenax::launch
