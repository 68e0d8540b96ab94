// The worker side of the protocol in one process: what a Worker writes, the preemption flag, the exit codes.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "tenax/error.hpp"
#include "tenax/worker.hpp"

namespace tenax::worker {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

long long field(const std::string& json, const std::string& key) {
  std::smatch m;
  std::regex pattern("\"" + key + "\":(-?[0-9]+)");
  if (!std::regex_search(json, m, pattern)) return -999;
  return std::stoll(m[1]);
}

double real_field(const std::string& json, const std::string& key) {
  std::smatch m;
  std::regex pattern("\"" + key + "\":(-?[0-9.]+)");
  return std::regex_search(json, m, pattern) ? std::stod(m[1]) : -999;
}

class WorkerProtocol : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(TENAX_LAUNCH_TEST_TMP) + "/worker-" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    setenv("TENAX_RUN_DIR", dir_.c_str(), 1);
    setenv("TENAX_ATTEMPT", "4", 1);
    setenv("TENAX_RESTART_COUNT", "3", 1);
    setenv("TENAX_CHECKPOINT_DIR", "/ckpt/here", 1);
    setenv("TENAX_HEARTBEAT_INTERVAL", "30ms", 1);
    setenv("SLURMD_NODENAME", "n7", 1);
    setenv("SLURM_RESTART_COUNT", "2", 1);
  }
  void TearDown() override {
    for (const char* name : {"TENAX_RUN_DIR", "TENAX_ATTEMPT", "TENAX_RESTART_COUNT", "TENAX_CHECKPOINT_DIR",
                             "TENAX_HEARTBEAT_INTERVAL", "SLURMD_NODENAME", "SLURM_RESTART_COUNT"}) {
      unsetenv(name);
    }
    std::filesystem::remove_all(dir_);
  }
  std::string beat_file(int rank) const { return dir_ + "/heartbeat/attempt-4/rank-" + std::to_string(rank) + ".json"; }
  std::string dir_;
};

TEST_F(WorkerProtocol, ReadsWhatTheLauncherPassed) {
  LaunchInfo info = launch_info();
  EXPECT_TRUE(info.supervised);
  EXPECT_EQ(info.run_dir, dir_);
  EXPECT_EQ(info.checkpoint_dir, "/ckpt/here");
  EXPECT_EQ(info.attempt, 4);
  EXPECT_EQ(info.restart_count, 3);
  EXPECT_EQ(info.slurm_restart_count, 2);
  EXPECT_EQ(info.node, "n7");
}

TEST_F(WorkerProtocol, HeartbeatsCarryStepTimingAndTheExitCode) {
  Worker worker(3);
  const std::string first = read_text(beat_file(3));
  EXPECT_EQ(field(first, "rank"), 3);
  EXPECT_EQ(field(first, "attempt"), 4);
  EXPECT_EQ(field(first, "pid"), getpid());
  EXPECT_EQ(field(first, "step"), -1);
  EXPECT_NE(first.find("\"node\":\"n7\""), std::string::npos) << first;

  worker.resumed_from(20, 0.25);
  for (int step = 21; step <= 23; ++step) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    worker.heartbeat(step);
  }
  worker.checkpoint_committed(23, 0.005);
  // The background thread keeps beating on its own.
  const long long beat_before = field(read_text(beat_file(3)), "beat");
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const std::string later = read_text(beat_file(3));
  EXPECT_GT(field(later, "beat"), beat_before);
  EXPECT_EQ(field(later, "step"), 23);
  EXPECT_EQ(field(later, "resumed_step"), 20);
  EXPECT_EQ(field(later, "steps_done"), 3);
  EXPECT_EQ(field(later, "checkpoint_step"), 23);
  EXPECT_EQ(field(later, "exit"), -1);
  EXPECT_NEAR(real_field(later, "load_s"), 0.25, 1e-6);
  EXPECT_GE(real_field(later, "productive_s"), 0.055);
  EXPECT_LT(real_field(later, "productive_s"), 1.0);

  EXPECT_EQ(worker.finish(kExitPreempted), kExitPreempted);
  EXPECT_EQ(field(read_text(beat_file(3)), "exit"), 75);
  // No temporary is left beside the record.
  for (const auto& entry : std::filesystem::directory_iterator(dir_ + "/heartbeat/attempt-4")) {
    EXPECT_EQ(entry.path().filename().string(), "rank-3.json");
  }
}

TEST_F(WorkerProtocol, PreemptionSignalsOnlySetTheFlagAndAreReportedAtOnce) {
  Worker worker(0);
  EXPECT_FALSE(worker.preemption_requested());
  ASSERT_EQ(raise(SIGUSR1), 0);  // with the handler installed the process survives
  EXPECT_TRUE(worker.preemption_requested());
  EXPECT_TRUE(preemption_requested());
  EXPECT_EQ(preemption_signal(), SIGUSR1);
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_EQ(preemption_signal(), SIGUSR1) << "the first request is the one reported";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(field(read_text(beat_file(0)), "preempt_signal"), SIGUSR1);
  worker.finish(kExitPreempted);
}

TEST_F(WorkerProtocol, WithoutTheLauncherNothingIsWritten) {
  unsetenv("TENAX_RUN_DIR");
  Worker worker(0);
  worker.resumed_from(0, 0);
  worker.heartbeat(1);
  EXPECT_FALSE(worker.info().supervised);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/heartbeat"));
  EXPECT_EQ(worker.finish(0), 0);
}

TEST(WorkerExitCodes, ExceptionsMapToTheProtocolsCodes) {
  EXPECT_EQ(exit_code_for(UsageError("bad flag")), kExitUsage);
  EXPECT_EQ(exit_code_for(CommError("peer gone")), kExitPeerFailure);
  EXPECT_EQ(exit_code_for(TimeoutError("all_reduce timed out")), kExitPeerFailure);
  EXPECT_EQ(exit_code_for(IoError("disk full")), kExitCrash);
  EXPECT_EQ(exit_code_for(std::runtime_error("other")), kExitCrash);
}

}  // namespace
}  // namespace tenax::worker
