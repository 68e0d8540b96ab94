// Reading the ranks' heartbeat files: what a rank (or anything else) writes there must not stop, block or mislead
// the launcher.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

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
}

// Values were once narrowed silently: rank 4294967297 read as rank 1, a negative beat as a huge one.
TEST(Heartbeat, FieldsOutOfTheirRangeAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"rank", "4294967297"},    {"rank", "-3"},         {"pid", "-5"},           {"pid", "9999999999"},
      {"attempt", "4294967297"}, {"beat", "-1"},         {"seq", "-2"},           {"seq", "18446744073709551615"},
      {"steps_done", "-1"},      {"exit", "4294967296"}, {"preempt_signal", "-1"}};
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

}  // namespace
}  // namespace tenax::launch
