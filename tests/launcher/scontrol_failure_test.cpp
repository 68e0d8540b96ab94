// `scontrol requeue` failures are reported with the command, how it ended, what it printed and the fix. The scontrol
// here is a small script placed first on PATH: this tests tenax-launch's reporting, not Slurm.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "options.hpp"
#include "processes.hpp"
#include "slurm.hpp"
#include "tenax/build_config.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

class FakeScontrol : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(TENAX_LAUNCH_TEST_TMP) + "/fake-scontrol-" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const char* path = std::getenv("PATH");
    saved_path_ = path != nullptr ? path : "";
    setenv("PATH", (dir_ + ":" + saved_path_).c_str(), 1);
  }
  void TearDown() override {
    setenv("PATH", saved_path_.c_str(), 1);
    std::filesystem::remove_all(dir_);
  }
  // Installs `body` as the shell script `scontrol` in the directory first on PATH.
  void install(const std::string& body) {
    const std::string path = dir_ + "/scontrol";
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    chmod(path.c_str(), 0755);
  }
  std::string dir_, saved_path_;
  Options options_;  // scontrol = "scontrol": found on PATH
};

TEST_F(FakeScontrol, AFailureNamesTheCommandStatusStderrAndTheFix) {
  install(
      "echo \"requeue $*\" >&1\n"
      "echo 'scontrol: error: Requeue of JobId=4242 failed: Requested operation is presently disabled' >&2\n"
      "exit 1");
  const std::string problem = requeue_job(options_, "4242");
  EXPECT_NE(problem.find("`scontrol requeue 4242` exited with status 1: scontrol: error: Requeue of JobId=4242 failed: "
                         "Requested operation is presently disabled | requeue requeue 4242"),
            std::string::npos)
      << problem;
  EXPECT_NE(problem.find("fix: the job may not be requeued: submit it with `sbatch --requeue`"), std::string::npos)
      << problem;
  EXPECT_NE(problem.find("the emergency checkpoint is kept"), std::string::npos) << problem;
  EXPECT_EQ(problem.find('\n'), std::string::npos) << "one line for the log: " << problem;
}

TEST_F(FakeScontrol, OtherSlurmErrorsGetTheirOwnFix) {
  install("echo 'slurm_requeue error: Invalid job id specified' >&2; exit 1");
  EXPECT_NE(requeue_job(options_, "1").find("fix: the job is finished or unknown to Slurm"), std::string::npos);
  install("echo 'Unable to contact slurm controller (connect failure)' >&2; exit 1");
  EXPECT_NE(requeue_job(options_, "1").find("fix: slurmctld did not answer; check it with `scontrol ping`"),
            std::string::npos);
  install("echo 'Access/permission denied' >&2; exit 1");
  EXPECT_NE(requeue_job(options_, "1").find("fix: only the job's owner or a Slurm operator"), std::string::npos);
  install("echo 'something new' >&2; exit 3");
  const std::string problem = requeue_job(options_, "1");
  EXPECT_NE(problem.find("exited with status 3: something new (fix: act on scontrol's message, or pass --no-requeue"),
            std::string::npos)
      << problem;
}

TEST_F(FakeScontrol, SuccessIsSilent) {
  install("echo 'requeued' >&2; exit 0");
  bool already = true;
  EXPECT_EQ(requeue_job(options_, "4242", &already), "");
  EXPECT_FALSE(already);
}

// After `scontrol requeue` by an operator or a node failure, Slurm has requeued the job already: its answer to a second
// requeue is ESLURM_JOB_PENDING, which is no failure, and "resubmit the job" would start a second copy of the run.
TEST_F(FakeScontrol, AJobAlreadyRequeuedIsNoFailure) {
  install("echo 'scontrol: error: Requeue of JobId=4242 failed: Job is pending execution' >&2; exit 1");
  bool already = false;
  EXPECT_EQ(requeue_job(options_, "4242", &already), "");
  EXPECT_TRUE(already);
}

TEST_F(FakeScontrol, ASignalAndSilenceAreReported) {
  install("kill -9 $$");
  const std::string problem = requeue_job(options_, "7");
  EXPECT_NE(problem.find("`scontrol requeue 7` was killed by signal 9 and printed nothing"), std::string::npos)
      << problem;
}

TEST_F(FakeScontrol, FloodedOutputIsBounded) {
  // 1 MiB on stderr: kept to the limit, marked as cut, and the command still finishes.
  install("head -c 1048576 /dev/zero | tr '\\0' 'x' >&2; exit 2");
  const std::string problem = requeue_job(options_, "7");
  EXPECT_NE(problem.find("exited with status 2: xxx"), std::string::npos) << problem.substr(0, 200);
  EXPECT_NE(problem.find("[output cut at 16 KiB per stream]"), std::string::npos);
  EXPECT_LT(problem.size(), 20000u);
}

TEST_F(FakeScontrol, AMissingScontrolIsNamedWithTheOption) {
  options_.scontrol = dir_ + "/no-such-scontrol";
  const std::string problem = requeue_job(options_, "7");
  EXPECT_NE(problem.find("`" + options_.scontrol + " requeue 7` could not be started"), std::string::npos) << problem;
  EXPECT_NE(problem.find("--scontrol PATH"), std::string::npos) << problem;
}

// The allocation is expanded by libslurm in the launcher's own process: an scontrol that fails is never run for it,
// and a node list Slurm's parser refuses is a UsageError naming the variable.
TEST_F(FakeScontrol, TheAllocationIsExpandedWithoutScontrol) {
  install("echo 'scontrol must not run' >&2; exit 1");
  setenv("SLURM_JOB_ID", "4242", 1);
#if TENAX_HAVE_SLURM
  setenv("SLURM_JOB_NODELIST", "n[1-3,7],gpu[08-10]", 1);
  const SlurmJob job = read_slurm_job();
  EXPECT_EQ(job.nodes, (std::vector<std::string>{"n1", "n2", "n3", "n7", "gpu08", "gpu09", "gpu10"}));
  // The CPUs the job holds per node, and srun's per task (SRUN_CPUS_PER_TASK; not the job's SLURM_CPUS_PER_TASK,
  // which srun 22.05 does not inherit); an overcommitting job's counts say nothing of what srun may run.
  setenv("SLURM_JOB_CPUS_PER_NODE", "2(x3),4(x4)", 1);
  setenv("SLURM_CPUS_PER_TASK", "8", 1);
  setenv("SRUN_CPUS_PER_TASK", "2", 1);
  const SlurmJob counted = read_slurm_job();
  EXPECT_EQ(counted.cpus_per_node, (std::vector<int>{2, 2, 2, 4, 4, 4, 4}));
  EXPECT_EQ(counted.cpus_per_task, 2);
  setenv("SLURM_OVERCOMMIT", "1", 1);
  EXPECT_TRUE(read_slurm_job().cpus_per_node.empty());
  for (const char* name : {"SLURM_JOB_CPUS_PER_NODE", "SLURM_CPUS_PER_TASK", "SRUN_CPUS_PER_TASK", "SLURM_OVERCOMMIT"})
    unsetenv(name);
  for (const char* bad : {"n[1-", "gpu[01-02]-ib"}) {
    setenv("SLURM_JOB_NODELIST", bad, 1);
    try {
      read_slurm_job();
      ADD_FAILURE() << "expected a UsageError for " << bad;
    } catch (const UsageError& error) {
      EXPECT_EQ(std::string(error.what()).rfind("SLURM_JOB_NODELIST: hostlist \"" + std::string(bad) + "\"", 0), 0u)
          << error.what();
    }
  }
#else
  setenv("SLURM_JOB_NODELIST", "n[1-3]", 1);
  EXPECT_THROW(read_slurm_job(), UsageError);
#endif
  unsetenv("SLURM_JOB_ID");
  unsetenv("SLURM_JOB_NODELIST");
}

TEST(SlurmAllocation, PerNodeCountsAreExpandedOrLeftUnknown) {
  EXPECT_EQ(expand_per_node_counts("4(x2),2", 10), (std::vector<int>{4, 4, 2}));
  EXPECT_EQ(expand_per_node_counts("8", 1), (std::vector<int>{8}));
  for (const char* bad : {"", "4(x2", "0", "x", "2,,2", "2(x0)", "-1", "99999999999"})
    EXPECT_TRUE(expand_per_node_counts(bad, 10).empty()) << bad;
  EXPECT_TRUE(expand_per_node_counts("2(x11)", 10).empty()) << "more nodes than the job has";
}

// srun refuses a step whose tasks need more CPUs than the job holds on a node; the launcher once retried that into a
// restart loop (exit 71). It is now a usage error before anything starts.
TEST(SlurmAllocation, TasksThatNeedMoreCpusThanTheJobHoldsAreNamed) {
  Options options;
  options.tasks_per_node = 3;
  SlurmJob job;
  job.nodes = {"n1", "n2"};
  job.cpus_per_node = {2, 2};
  const std::string problem = tasks_fit_allocation(options, 2, 3, job);
  EXPECT_NE(problem.find("--tasks-per-node 3 puts 3 tasks of 1 CPU(s) on each of 2 nodes, but the job holds 3 or more "
                         "CPUs on 0 of its nodes only (at most 2"),
            std::string::npos)
      << problem;
  EXPECT_NE(problem.find("allocate more CPUs per node"), std::string::npos) << problem;
  EXPECT_EQ(tasks_fit_allocation(options, 2, 2, job), "");
  job.cpus_per_task = 2;
  EXPECT_NE(tasks_fit_allocation(options, 2, 2, job), "") << "2 tasks of 2 CPUs on nodes of 2";
  job.cpus_per_task = 1;
  job.cpus_per_node = {4, 2};
  EXPECT_EQ(tasks_fit_allocation(options, 1, 3, job), "") << "one node of 4 CPUs is enough";
  EXPECT_NE(tasks_fit_allocation(options, 2, 3, job), "");
  options.extra_launcher_args = {"--overcommit"};
  EXPECT_EQ(tasks_fit_allocation(options, 2, 3, job), "") << "srun is told to overcommit";
  options.extra_launcher_args = {"-c1"};
  EXPECT_EQ(tasks_fit_allocation(options, 2, 3, job), "") << "srun is given its own CPU count";
  job.cpus_per_node.clear();
  options.extra_launcher_args.clear();
  EXPECT_EQ(tasks_fit_allocation(options, 2, 3, job), "") << "unknown CPU counts check nothing";
}

TEST(RunCommand, ACommandPastItsTimeLimitIsKilledWithWhatItStarted) {
  const auto start = std::chrono::steady_clock::now();
  // The shell's child keeps the pipes open: the whole process group must go.
  CommandResult result =
      run_command({"/bin/sh", "-c", "echo started; sleep 30; echo never"}, 1024, std::chrono::milliseconds(300));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(result.timed_out);
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.signal, SIGKILL);
  EXPECT_EQ(result.out, "started\n");
  EXPECT_LT(took, 5.0);
}

TEST(RunCommand, ACommandThatClosesItsOutputAndHangsIsStillBounded) {
  CommandResult result =
      run_command({"/bin/sh", "-c", "exec >&- 2>&-; sleep 30"}, 1024, std::chrono::milliseconds(300));
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.signal, SIGKILL);
}

TEST(RunCommand, StdoutAndStderrAreKeptApart) {
  CommandResult result =
      run_command({"/bin/sh", "-c", "echo out; echo err >&2; exit 4"}, 1024, std::chrono::milliseconds(10000));
  EXPECT_EQ(result.exit_code, 4);
  EXPECT_EQ(result.out, "out\n");
  EXPECT_EQ(result.err, "err\n");
  EXPECT_FALSE(result.truncated);
}

}  // namespace
}  // namespace tenax::launch
