// The worker side of the protocol in one process: what a Worker writes, the preemption flag, the exit codes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>

#include "core/json.hpp"
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

// A heartbeat record, read with the strict JSON reader the launcher uses: a record that is not valid JSON fails here.
json::Value record(const std::string& path) {
  return json::Value::parse(read_text(path));
}

long long field(const std::string& path, const std::string& key) {
  return record(path).at(key).i64();
}

// Waits for file-system events in one folder (inotify), so tests wait for the event they need instead of sleeping.
class FolderEvents {
 public:
  FolderEvents(const std::string& path, std::uint32_t mask) : fd_(inotify_init1(IN_CLOEXEC | IN_NONBLOCK)) {
    if (fd_ < 0 || inotify_add_watch(fd_, path.c_str(), mask) < 0)
      throw std::runtime_error("inotify on " + path + ": " + std::strerror(errno));
  }
  ~FolderEvents() { close(fd_); }
  FolderEvents(const FolderEvents&) = delete;
  FolderEvents& operator=(const FolderEvents&) = delete;

  // True once an event for `name` (or for the watched file itself when `name` is empty) arrived; false when none came
  // within `limit` (a failure bound, far above the time the event takes).
  bool wait_for(const std::string& name, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    alignas(inotify_event) char buffer[4096];
    for (;;) {
      const ssize_t n = read(fd_, buffer, sizeof buffer);
      for (ssize_t at = 0; at < n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
        if (event->len == 0 ? name.empty() : name == event->name) return true;
        at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      poll(&p, 1, static_cast<int>(left.count()));
    }
  }

 private:
  int fd_;
};

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
  const std::string path = beat_file(3);
  const json::Value first = record(path);
  EXPECT_EQ(first.at("v").i64(), 1);
  EXPECT_EQ(first.at("rank").i64(), 3);
  EXPECT_EQ(first.at("attempt").i64(), 4);
  EXPECT_EQ(first.at("pid").i64(), getpid());
  EXPECT_EQ(first.at("step").i64(), -1);
  EXPECT_EQ(first.at("node").string(), "n7");

  worker.resumed_from(20, 0.25);
  for (int step = 21; step <= 23; ++step) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // step time to account, not synchronisation
    worker.heartbeat(step);
  }
  worker.checkpoint_committed(23, 0.005);
  worker.checkpoint_counts(2, 5);
  // The background thread keeps beating on its own: wait for two more records (the first may predate the commit).
  const long long beat_before = field(path, "beat");
  FolderEvents renamed(dir_ + "/heartbeat/attempt-4", IN_MOVED_TO);
  ASSERT_TRUE(renamed.wait_for("rank-3.json"));
  ASSERT_TRUE(renamed.wait_for("rank-3.json"));
  const json::Value later = record(path);
  EXPECT_GT(later.at("beat").i64(), beat_before);
  EXPECT_EQ(later.at("step").i64(), 23);
  EXPECT_EQ(later.at("resumed_step").i64(), 20);
  EXPECT_EQ(later.at("resumed_tier").string(), "shared") << "a program's own checkpoint: durable storage";
  EXPECT_EQ(later.at("steps_done").i64(), 3);
  EXPECT_EQ(later.at("checkpoint_step").i64(), 23);
  EXPECT_EQ(later.at("shared_saves").i64(), 2);
  EXPECT_EQ(later.at("local_saves").i64(), 5);
  EXPECT_EQ(later.at("exit").i64(), -1);
  EXPECT_EQ(later.at("preempt_signal").i64(), preemption_signal());
  EXPECT_GE(later.at("seq").i64(), 0);
  EXPECT_DOUBLE_EQ(later.at("load_s").number(), 0.25);
  EXPECT_DOUBLE_EQ(later.at("checkpoint_stall_s").number(), 0.005);
  EXPECT_GE(later.at("productive_s").number(), 0.055);
  EXPECT_LT(later.at("productive_s").number(), 1.0);

  EXPECT_EQ(worker.finish(kExitPreempted), kExitPreempted);
  EXPECT_EQ(field(path, "exit"), 75);
  // No temporary is left beside the record.
  for (const auto& entry : std::filesystem::directory_iterator(dir_ + "/heartbeat/attempt-4")) {
    EXPECT_EQ(entry.path().filename().string(), "rank-3.json");
  }
}

// A checkpoint that blocked training for longer than a step (a save waiting for the previous write to a slow shared
// directory) is reported with its commit, after the heartbeats that counted its time: all of it comes off the
// productive time, not only as much as the next step took. The stall here is longer than the whole test, so once it
// is taken off whole nothing is left productive; taken off the next step only, the steps before it would remain.
TEST_F(WorkerProtocol, AStallLongerThanAStepComesOffTheProductiveTimeWhole) {
  Worker worker(3);
  worker.resumed_from(20, 0.0);
  for (int step = 21; step <= 23; ++step)
    worker.heartbeat(step);
  constexpr double kStall = 1000.0;
  worker.checkpoint_committed(23, kStall);
  worker.heartbeat(24);
  EXPECT_EQ(worker.finish(0), 0);
  const json::Value last = record(beat_file(3));
  EXPECT_DOUBLE_EQ(last.at("checkpoint_stall_s").number(), kStall);
  EXPECT_EQ(last.at("productive_s").number(), 0.0) << "the stall must come off whole";
  EXPECT_EQ(last.at("steps_done").i64(), 4);
}

// A stall reported with the final commit, after the last heartbeat: the part that fell in the steps still comes off
// their time (in finish()), the final checkpoint's own part does not (no step time counted it). Stalls longer than
// the whole test make both visible: taken off, nothing productive is left; not taken off, the steps' time is.
TEST_F(WorkerProtocol, AStallReportedWithTheFinalCommitComesOffTheStepsButNotTheFinalCheckpoint) {
  Worker worker(3);
  worker.resumed_from(20, 0.0);
  worker.heartbeat(21);
  worker.heartbeat(22);
  worker.checkpoint_committed(22, 1000.0 + 2000.0, 2000.0);  // 1000 s in the steps, 2000 s the final checkpoint
  EXPECT_EQ(worker.finish(kExitPreempted), kExitPreempted);
  const json::Value last = record(beat_file(3));
  EXPECT_DOUBLE_EQ(last.at("checkpoint_stall_s").number(), 3000.0);
  EXPECT_DOUBLE_EQ(last.at("final_checkpoint_s").number(), 2000.0);
  EXPECT_EQ(last.at("productive_s").number(), 0.0) << "the steps' part must come off in finish()";

  Worker only_final(3);
  only_final.resumed_from(22, 0.0);
  only_final.heartbeat(23);
  only_final.checkpoint_committed(23, 2000.0, 2000.0);
  EXPECT_EQ(only_final.finish(kExitPreempted), kExitPreempted);
  EXPECT_GT(record(beat_file(3)).at("productive_s").number(), 0.0) << "the final checkpoint is no step's time";
}

// The checkpoint that ends an attempt (the emergency one, the last of training) is reported within the stalls and
// apart from them; a program that says it took longer than the whole stall reported is held to the stall.
TEST_F(WorkerProtocol, TheCheckpointThatEndsAnAttemptIsReportedApartWithinTheStalls) {
  Worker worker(3);
  worker.resumed_from(20, 0.0);
  worker.heartbeat(21);
  worker.checkpoint_committed(21, 0.25);
  EXPECT_EQ(worker.finish(-1), -1);
  EXPECT_DOUBLE_EQ(record(beat_file(3)).at("final_checkpoint_s").number(), 0.0) << "a periodic stall only";

  Worker second(3);
  second.resumed_from(21, 0.0);
  second.heartbeat(22);
  second.checkpoint_committed(22, 0.5, 0.375);
  second.checkpoint_committed(22, 0.125, 2.0);  // more than the stall it is part of
  EXPECT_EQ(second.finish(kExitPreempted), kExitPreempted);
  const json::Value last = record(beat_file(3));
  EXPECT_DOUBLE_EQ(last.at("checkpoint_stall_s").number(), 0.625);
  EXPECT_DOUBLE_EQ(last.at("final_checkpoint_s").number(), 0.5) << "0.375, and 0.125 of the claimed 2 s";
}

TEST_F(WorkerProtocol, PreemptionSignalsOnlySetTheFlagAndAreReportedAtOnce) {
  // The flag is process-wide and cannot be cleared: only the first run in a process can see it change.
  if (preemption_requested()) GTEST_SKIP() << "a preemption signal was already recorded by an earlier run";
  setenv("TENAX_HEARTBEAT_INTERVAL", "1h", 1);  // so that the record that follows is the one the signal caused
  Worker worker(0);
  FolderEvents renamed(dir_ + "/heartbeat/attempt-4", IN_MOVED_TO);
  EXPECT_FALSE(worker.preemption_requested());
  ASSERT_EQ(raise(SIGUSR1), 0);  // with the handler installed the process survives
  EXPECT_TRUE(worker.preemption_requested());
  EXPECT_TRUE(preemption_requested());
  EXPECT_EQ(preemption_signal(), SIGUSR1);
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_EQ(preemption_signal(), SIGUSR1) << "the first request is the one reported";
  ASSERT_TRUE(renamed.wait_for("rank-0.json")) << "no heartbeat was written after the signal";
  EXPECT_EQ(field(beat_file(0), "preempt_signal"), SIGUSR1);
  worker.finish(kExitPreempted);
}

// Node names are whatever SLURMD_NODENAME holds: the record must stay one valid JSON line however long the name and
// whatever its characters (a fixed-size buffer once cut it into invalid JSON).
TEST_F(WorkerProtocol, HeartbeatIsValidJsonWhateverTheNodeName) {
  std::string node = "node-\"quoted\"\\back\tslash\nline\x01\x1f-\u00fc-";
  while (node.size() < 5000)
    node += "abcdefghij";
  // A byte that is not UTF-8 (a name cut in the middle of a character) is written as U+FFFD.
  setenv("SLURMD_NODENAME", (node + "\xC3").c_str(), 1);
  node += "\xEF\xBF\xBD";
  Worker worker(2);
  const std::string text = read_text(beat_file(2));
  EXPECT_EQ(text.find('\n'), text.size() - 1) << "one line, newline-terminated";
  const json::Value first = json::Value::parse(text);
  EXPECT_EQ(first.at("node").string(), node);
  EXPECT_EQ(first.at("rank").i64(), 2);
  EXPECT_EQ(first.at("exit").i64(), -1);
  worker.finish(0);
  EXPECT_EQ(record(beat_file(2)).at("node").string(), node);
  EXPECT_EQ(field(beat_file(2), "exit"), 0);
}

// A heartbeat write that blocks (a stalled file server) must not block the training thread: the heartbeat thread
// writes the file without holding the lock heartbeat() takes. The stall is made deterministic with a FIFO at the
// temporary path the record is written to: its buffer is filled in advance, so the heartbeat thread's write blocks
// until the test reads. inotify says when the heartbeat thread has opened the FIFO, i.e. is committed to that write.
TEST_F(WorkerProtocol, HeartbeatReturnsWhileTheFileWriteIsBlocked) {
  setenv("TENAX_HEARTBEAT_INTERVAL", "1h", 1);  // only the writes the test causes
  Worker worker(1);
  const std::string temporary = beat_file(1) + ".tmp." + std::to_string(getpid());
  ASSERT_EQ(mkfifo(temporary.c_str(), 0600), 0) << std::strerror(errno);
  const int reader = open(temporary.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0) << std::strerror(errno);
  const int filler = open(temporary.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(filler, 0) << std::strerror(errno);
  fcntl(filler, F_SETPIPE_SZ, 4096);
  const std::string chunk(512, 'x');
  std::size_t filled = 0;
  for (ssize_t n; (n = write(filler, chunk.data(), chunk.size())) > 0;)
    filled += static_cast<std::size_t>(n);
  ASSERT_EQ(errno, EAGAIN);
  FolderEvents opened(temporary, IN_OPEN);

  worker.resumed_from(0, 0.5);  // an urgent beat: the heartbeat thread writes at once, into the full FIFO
  ASSERT_TRUE(opened.wait_for("")) << "the heartbeat thread never opened its temporary file";

  auto training = std::async(std::launch::async, [&] { worker.heartbeat(1); });
  const bool returned = training.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  EXPECT_TRUE(returned) << "heartbeat() waited for the blocked heartbeat file write";

  // Unblock the writer: close the filler and read until every writer has closed the FIFO.
  close(filler);
  std::string drained;
  for (;;) {
    char buffer[4096];
    const ssize_t n = read(reader, buffer, sizeof buffer);
    if (n > 0) {
      drained.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0) {
      break;  // end of file: the heartbeat thread wrote its record and closed the FIFO
    } else {
      pollfd p{reader, POLLIN, 0};
      poll(&p, 1, -1);
    }
  }
  close(reader);
  training.wait();
  const json::Value blocked_record = json::Value::parse(drained.substr(filled));
  EXPECT_EQ(blocked_record.at("resumed_step").i64(), 0);
  worker.finish(0);
  const json::Value last = record(beat_file(1));
  EXPECT_EQ(last.at("step").i64(), 1);
  EXPECT_EQ(last.at("steps_done").i64(), 1);
  EXPECT_EQ(last.at("exit").i64(), 0);
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
