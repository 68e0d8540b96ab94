#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "flat_json.hpp"
#include "ledger.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

class LedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(TENAX_LAUNCH_TEST_TMP) + "/ledger-" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = dir_ + "/ledger.jsonl";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string attempt(const char* outcome, long long max_step, double start, double end, double productive, double lost,
                      double detect = 0, double teardown = 0, double relaunch = 0, double load = 0,
                      double backoff = 0) {
    return JsonLine()
        .add("event", "attempt")
        .add("outcome", outcome)
        .add("max_step", max_step)
        .add("start", start)
        .add("end", end)
        .add("productive_s", productive)
        .add("work_lost_s", lost)
        .add("detect_s", detect)
        .add("teardown_s", teardown)
        .add("relaunch_s", relaunch)
        .add("load_s", load)
        .add("checkpoint_stall_s", 0.5)
        .add("backoff_s", backoff)
        .str();
  }
  std::string start(double time) { return JsonLine().add("event", "start").add("time", time).str(); }
  std::string end(double time, int code) {
    return JsonLine().add("event", "end").add("time", time).add("exit_code", code).str();
  }

  std::string dir_, path_;
};

TEST_F(LedgerTest, HistoryCountsFailuresAndAttemptsWithoutProgressAcrossRequeues) {
  {
    Ledger ledger(path_);
    ledger.append(start(100));
    ledger.append(attempt("crash", 7, 100, 110, 8, 2));  // progress from nothing
    ledger.append(attempt("crash", 7, 111, 120, 2, 2));  // none
    ledger.append(attempt("preempted", 7, 121, 130, 1, 0));
    ledger.append(end(131, 75));
    ledger.append(start(200));                          // requeued: limits continue
    ledger.append(attempt("hang", 6, 200, 210, 1, 1));  // none
  }
  Ledger reloaded(path_);
  EXPECT_EQ(reloaded.history().invocations, 2);
  EXPECT_EQ(reloaded.history().attempts, 4);
  EXPECT_EQ(reloaded.history().failed_restarts, 3);
  EXPECT_EQ(reloaded.history().no_progress_streak, 2);
  EXPECT_EQ(reloaded.history().best_step, 7);
}

TEST_F(LedgerTest, AnInvocationThatEndedOnPurposeResetsTheLimits) {
  {
    Ledger ledger(path_);
    ledger.append(start(1));
    ledger.append(attempt("crash", 3, 1, 2, 1, 0));
    ledger.append(attempt("crash", 3, 2, 3, 1, 0));
    ledger.append(end(4, 70));
  }
  Ledger reloaded(path_);
  EXPECT_EQ(reloaded.history().attempts, 2);
  EXPECT_EQ(reloaded.history().failed_restarts, 0);
  EXPECT_EQ(reloaded.history().no_progress_streak, 0);
}

TEST_F(LedgerTest, GoodputIsKeptStepTimeOverWallTimeIncludingRequeueWaits) {
  {
    Ledger ledger(path_);
    ledger.append(start(1000));
    ledger.append(attempt("crash", 10, 1000, 1020, 15, 3, 1, 0.5, 2, 1, 1));
    ledger.append(attempt("preempted", 20, 1021, 1040, 16, 0, 0, 0, 1.5, 0.5));
    ledger.append(end(1041, 75));
    ledger.append(start(1051));  // 10 s pending in the queue
    ledger.append(attempt("success", 30, 1051, 1070, 17, 0, 0, 0, 1, 0.5));
    ledger.append(end(1071, 0));
  }
  GoodputSummary s = summarize_ledger(path_);
  EXPECT_EQ(s.invocations, 2);
  EXPECT_EQ(s.attempts, 3);
  EXPECT_EQ(s.failures, 1);
  EXPECT_EQ(s.preemptions, 1);
  EXPECT_NEAR(s.wall_s, 71.0, 1e-6);  // 41 + 10 + 20
  EXPECT_NEAR(s.requeue_wait_s, 10.0, 1e-6);
  EXPECT_NEAR(s.productive_s, 12 + 16 + 17, 1e-6);
  EXPECT_NEAR(s.work_lost_s, 3, 1e-6);
  EXPECT_NEAR(s.detect_s, 1, 1e-6);
  EXPECT_NEAR(s.relaunch_s, 4.5, 1e-6);
  EXPECT_NEAR(s.load_s, 2, 1e-6);
  EXPECT_NEAR(s.checkpoint_stall_s, 1.5, 1e-6);
  EXPECT_NEAR(s.goodput(), 45.0 / 71.0, 1e-9);
  const double attributed = s.productive_s + s.work_lost_s + s.detect_s + s.teardown_s + s.relaunch_s + s.load_s +
                            s.checkpoint_stall_s + s.backoff_s + s.requeue_wait_s + s.other_s;
  EXPECT_NEAR(attributed, s.wall_s, 1e-6);
  std::string table = format_summary(s);
  EXPECT_NE(table.find("goodput 63.4 %"), std::string::npos) << table;
  EXPECT_NE(table.find("requeue wait"), std::string::npos) << table;
}

TEST_F(LedgerTest, ADamagedLineIsReportedWithItsNumber) {
  std::ofstream(path_) << start(1) << "{\"event\":\"attempt\",\"outcome\":\n";
  try {
    Ledger ledger(path_);
    FAIL() << "expected IoError";
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find("line 2"), std::string::npos) << error.what();
  }
}

TEST(FlatJson, ReadsWhatJsonLineWrites) {
  std::string line =
      JsonLine().add("s", "a \"quoted\"\tvalue\\").add("i", 42).add("d", -1.5).add("b", true).add_null("n").str();
  auto json = FlatJson::parse(line, "test");
  EXPECT_EQ(json.string("s"), "a \"quoted\"\tvalue\\");
  EXPECT_EQ(json.integer("i"), 42);
  EXPECT_DOUBLE_EQ(json.number("d"), -1.5);
  EXPECT_EQ(json.integer("b"), 1);
  EXPECT_EQ(json.integer("n", -7), -7);
  EXPECT_EQ(json.integer("absent", 3), 3);
  EXPECT_THROW(json.number("s"), IoError);
  EXPECT_THROW(FlatJson::parse("{\"a\":{\"b\":1}}", "nested"), IoError);
  EXPECT_THROW(FlatJson::parse("{\"a\":1} trailing", "trailing"), IoError);
}

}  // namespace
}  // namespace tenax::launch
