// Reading the ranks' heartbeat files: what a rank (or anything else) writes there must not stop, block or mislead
// the launcher.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/json.hpp"
#include "heartbeats.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

class HeartbeatFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    run_dir_ = std::string(TENAX_LAUNCH_TEST_TMP) + "/heartbeats-" + std::to_string(getpid());
    std::filesystem::remove_all(run_dir_);
    prepare_heartbeats(run_dir_, 1);
    dir_ = run_dir_ + "/heartbeat/attempt-1";
  }
  void TearDown() override { std::filesystem::remove_all(run_dir_); }

  std::string run_dir_, dir_;
};

std::string record(const std::string& key, const std::string& value) {
  json::ObjectWriter line;
  line.add("v", 1).add("rank", 0).add("node", "n1").add("pid", 42).add("attempt", 1).add("beat", 3).add("step", 5);
  std::string text = line.str();
  // Replace or add the member under test with a raw value.
  const std::string quoted = "\"" + key + "\":";
  if (auto at = text.find(quoted); at != std::string::npos) {
    const auto end = text.find_first_of(",}", at);
    text.replace(at, end - at, quoted + value);
  } else {
    text.insert(text.size() - 1, "," + quoted + value);
  }
  return text;
}

std::string parse_error(const std::string& text) {
  try {
    parse_heartbeat(text, "the heartbeat");
  } catch (const IoError& error) {
    return error.what();
  }
  return "";
}

TEST(Heartbeat, AValidRecordIsRead) {
  const Heartbeat h = parse_heartbeat(record("exit", "75"), "rank-0.json");
  EXPECT_EQ(h.rank, 0);
  EXPECT_EQ(h.node, "n1");
  EXPECT_EQ(h.pid, 42);
  EXPECT_EQ(h.step, 5);
  EXPECT_EQ(h.exit_code, 75);
  EXPECT_EQ(parse_heartbeat(record("shared_saves", "3"), "r").shared_saves, 3);
  EXPECT_EQ(parse_heartbeat(record("local_saves", "12"), "r").local_saves, 12);
  EXPECT_EQ(h.shared_saves, 0) << "a program too old to count reports none";
}

// Values were once narrowed silently: rank 4294967297 read as rank 1, a negative beat as a huge one.
TEST(Heartbeat, FieldsOutOfTheirRangeAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {{"rank", "4294967297"},
                                                                  {"rank", "-3"},
                                                                  {"pid", "-5"},
                                                                  {"pid", "9999999999"},
                                                                  {"attempt", "4294967297"},
                                                                  {"beat", "-1"},
                                                                  {"seq", "-2"},
                                                                  {"seq", "18446744073709551615"},
                                                                  {"steps_done", "-1"},
                                                                  {"exit", "4294967296"},
                                                                  {"preempt_signal", "-1"},
                                                                  {"shared_saves", "-1"},
                                                                  {"local_saves", "-4"}};
  for (const auto& [key, value] : cases) {
    const std::string message = parse_error(record(key, value));
    EXPECT_NE(message.find(key), std::string::npos) << key << "=" << value << ": " << message;
  }
}

// Steps and times are the program's own numbers (Worker::heartbeat, resumed_from, checkpoint_committed): read as
// written.
TEST(Heartbeat, StepsAndTimesAreTheProgramsOwn) {
  EXPECT_EQ(parse_heartbeat(record("step", "-7"), "r").step, -7);
  EXPECT_EQ(parse_heartbeat(record("checkpoint_step", "-9223372036854775808"), "r").checkpoint_step, INT64_MIN);
  EXPECT_EQ(parse_heartbeat(record("load_s", "-1.5"), "r").load_s, -1.5);
  EXPECT_EQ(parse_heartbeat(record("exit", "300"), "r").exit_code, 300);
  EXPECT_EQ(parse_heartbeat(record("resumed_tier", "\"node-local\""), "r").resumed_tier, "node-local");
  EXPECT_EQ(parse_heartbeat(record("exit", "0"), "r").resumed_tier, "") << "a program too old to say";
}

TEST_F(HeartbeatFiles, AFileLargerThanAnyHeartbeatIsRefusedWithoutReadingIt) {
  {
    std::ofstream out(dir_ + "/rank-0.json");
    out << std::string(kMaxHeartbeatBytes, ' ') << record("exit", "-1");
  }
  try {
    read_heartbeats(run_dir_, 1);
    FAIL() << "an oversized heartbeat was read";
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find("rank-0.json"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("bytes"), std::string::npos) << error.what();
  }
}

// A launcher killed outright leaves its attempt's folder and no ledger record: the next one numbers on after it.
TEST_F(HeartbeatFiles, TheHighestAttemptFolderIsFound) {
  EXPECT_EQ(highest_heartbeat_attempt(run_dir_), 1);
  std::filesystem::create_directories(run_dir_ + "/heartbeat/attempt-12");
  std::filesystem::create_directories(run_dir_ + "/heartbeat/attempt-x3");
  std::filesystem::create_directories(run_dir_ + "/heartbeat/.stale-attempt-40-1-1");
  std::filesystem::create_directories(run_dir_ + "/heartbeat/attempt-99999999999");
  EXPECT_EQ(highest_heartbeat_attempt(run_dir_), 12);
  EXPECT_EQ(highest_heartbeat_attempt(run_dir_ + "/missing"), 0);
}

// A FIFO in place of a heartbeat once blocked the launcher forever in open(): no failure detection, no preemption.
TEST_F(HeartbeatFiles, AFifoNamedLikeAHeartbeatDoesNotBlock) {
  ASSERT_EQ(mkfifo((dir_ + "/rank-1.json").c_str(), 0644), 0);
  std::ofstream(dir_ + "/rank-0.json") << record("exit", "-1");
  alarm(30);  // a watchdog: blocking here would otherwise hang the test
  try {
    read_heartbeats(run_dir_, 1);
    ADD_FAILURE() << "a FIFO was read as a heartbeat";
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find("not a regular file"), std::string::npos) << error.what();
  }
  alarm(0);
}

TEST_F(HeartbeatFiles, OnlyRankFilesAreRead) {
  std::ofstream(dir_ + "/rank-0.json") << record("exit", "-1");
  std::ofstream(dir_ + "/rank-0.json.tmp.123") << "{half";
  std::ofstream(dir_ + "/rank-.json") << "junk";
  std::ofstream(dir_ + "/rank-1x.json") << "junk";
  std::ofstream(dir_ + "/notes.txt") << "junk";
  const auto beats = read_heartbeats(run_dir_, 1);
  ASSERT_EQ(beats.size(), 1u);
  EXPECT_EQ(beats[0].rank, 0);
}

// The ranks of a node cut off from the network live on and keep beating into the shared run directory while the
// launcher prepares the next attempt; removing their folder under them once failed with "Directory not empty" and
// ended the whole run (exit 70) instead of relaunching on the spare node.
TEST_F(HeartbeatFiles, RanksStillBeatingIntoAnEarlierAttemptDoNotStopTheNextOne) {
  std::atomic<bool> stop{false};
  std::atomic<long> written{0};
  std::atomic<int> newest{1};
  // Writers as the worker writes (a temporary, then a rename), by path, into the attempt they read last: some into a
  // folder being removed.
  auto beat = [&](int rank) {
    for (long i = 0; !stop; ++i) {
      const std::string dir = run_dir_ + "/heartbeat/attempt-" + std::to_string(newest.load());
      const std::string temporary = dir + "/rank-" + std::to_string(rank) + ".json.tmp." + std::to_string(i);
      const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) continue;  // the folder moved away: a cut-off rank's write fails, as it would on a real node
      close(fd);
      if (rename(temporary.c_str(), (dir + "/rank-" + std::to_string(rank) + ".json").c_str()) == 0) ++written;
    }
  };
  std::vector<std::thread> writers;
  for (int rank = 0; rank < 4; ++rank)
    writers.emplace_back(beat, rank);
  while (written < 1000)
    std::this_thread::yield();  // they are writing
  std::vector<std::string> warnings;
  for (int attempt = 2; attempt <= 20; ++attempt) {
    // Every attempt's folder gets writers again, as the next cut-off node's ranks would.
    ASSERT_NO_THROW(warnings = prepare_heartbeats(run_dir_, attempt)) << "attempt " << attempt;
    EXPECT_TRUE(warnings.empty()) << warnings.front();
    EXPECT_TRUE(std::filesystem::is_directory(run_dir_ + "/heartbeat/attempt-" + std::to_string(attempt)));
    newest = attempt;
    const long before = written;
    while (written < before + 100)
      std::this_thread::yield();
  }
  stop = true;
  for (auto& writer : writers)
    writer.join();
  // Only the newest attempt's folder remains, and nothing of earlier ones.
  int entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir_ + "/heartbeat")) {
    EXPECT_EQ(entry.path().filename(), "attempt-20");
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

}  // namespace
}  // namespace tenax::launch
