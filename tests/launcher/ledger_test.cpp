#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/json.hpp"
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
    return json::ObjectWriter()
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
  std::string start(double time) { return json::ObjectWriter().add("event", "start").add("time", time).str(); }
  std::string end(double time, int code) {
    return json::ObjectWriter().add("event", "end").add("time", time).add("exit_code", code).str();
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
  EXPECT_EQ(reloaded.history().progress.streak(), 2);
  EXPECT_EQ(reloaded.history().progress.best_max_step(), 7);
}

// Attempts judged by committed checkpoints are replayed on that basis after a requeue: heartbeat progress without a
// new checkpoint extends the streak, and a record of an older launcher (no "progress_by") still replays by heartbeats.
TEST_F(LedgerTest, HistoryReplaysEachAttemptOnTheBasisItWasJudgedOn) {
  auto judged = [&](const char* outcome, long long max_step, long long committed, const char* basis) {
    std::string line = attempt(outcome, max_step, 1, 2, 1, 0);
    line.pop_back();  // the closing brace
    return line + ",\"checkpoint_step\":" + std::to_string(committed) + ",\"progress_by\":\"" + basis + "\"}";
  };
  {
    Ledger ledger(path_);
    ledger.append(start(1));
    ledger.append(attempt("crash", 4, 1, 2, 1, 0));           // older launcher: progress from nothing
    ledger.append(judged("crash", 9, 5, "checkpoint"));       // new checkpoint 5
    ledger.append(judged("crash", 12, 5, "checkpoint"));      // further, but nothing new committed
    ledger.append(judged("preempted", 14, 5, "checkpoint"));  // leaves the streak alone
    ledger.append(end(3, 75));
  }
  Ledger reloaded(path_);
  EXPECT_EQ(reloaded.history().progress.streak(), 1);
  EXPECT_EQ(reloaded.history().progress.best_committed_step(), 5);
  EXPECT_EQ(reloaded.history().progress.best_max_step(), 14);
  EXPECT_EQ(reloaded.history().failed_restarts, 3);
  {
    Ledger ledger(path_);
    ledger.append(judged("crash", 20, 5, "checkpoint"));
  }
  EXPECT_EQ(Ledger(path_).history().progress.streak(), 2);
}

TEST_F(LedgerTest, AnUnknownProgressBasisIsReportedNotGuessed) {
  std::ofstream(path_) << start(1) << "\n{\"event\":\"attempt\",\"outcome\":\"crash\",\"progress_by\":\"steps\"}\n";
  try {
    Ledger ledger(path_);
    FAIL() << "expected UsageError";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("progress_by"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("line 2"), std::string::npos) << error.what();
  }
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
  EXPECT_EQ(reloaded.history().progress.streak(), 0);
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

// A job its user cancelled (scancel) ends like a preemption (exit 75, the emergency checkpoint kept) but is not
// requeued: submitted again later, it starts with fresh limits, and the time until then is not the run's requeue wait.
TEST_F(LedgerTest, AJobCancelledByItsUserIsResubmittedWithFreshLimitsAndNoRequeueWait) {
  {
    Ledger ledger(path_);
    ledger.append(start(1000));
    ledger.append(attempt("crash", 10, 1000, 1020, 15, 3, 1, 0.5, 2, 1, 1));
    ledger.append(attempt("preempted", 20, 1021, 1040, 16, 0, 0, 0, 1.5, 0.5));
    ledger.append(
        json::ObjectWriter().add("event", "end").add("time", 1041.0).add("exit_code", 75).add("cancelled", true).str());
    ledger.append(start(5000));  // submitted again an hour later
    ledger.append(attempt("success", 30, 5000, 5019, 17, 0, 0, 0, 1, 0.5));
    ledger.append(end(5020, 0));
  }
  GoodputSummary s = summarize_ledger(path_);
  EXPECT_NEAR(s.requeue_wait_s, 0.0, 1e-9);
  EXPECT_NEAR(s.wall_s, 61.0, 1e-6);  // 41 + 20
  // The history as the launcher of the resubmitted job reads it, before its own records.
  std::ofstream(path_, std::ios::trunc) << start(1000) << "\n"
                                        << attempt("crash", 10, 1000, 1020, 15, 3) << "\n"
                                        << "{\"event\":\"end\",\"time\":1041,\"exit_code\":75,\"cancelled\":true}\n";
  EXPECT_EQ(Ledger(path_).history().failed_restarts, 0);
  std::ofstream(path_, std::ios::trunc) << start(1000) << "\n"
                                        << attempt("crash", 10, 1000, 1020, 15, 3) << "\n"
                                        << end(1041, 75) << "\n";
  EXPECT_EQ(Ledger(path_).history().failed_restarts, 1) << "a preemption's requeue keeps counting";
}

// Attempts are numbered after the highest number the records carry: after an attempt without a record (its launcher
// killed outright) the count of records falls behind the numbers, and the next number must not repeat one.
TEST_F(LedgerTest, HistoryKnowsTheHighestAttemptNumber) {
  {
    Ledger ledger(path_);
    ledger.append(start(1000));
    for (int number : {1, 2, 4})
      ledger.append(json::ObjectWriter().add("event", "attempt").add("attempt", number).add("outcome", "crash").str());
  }
  Ledger reloaded(path_);
  EXPECT_EQ(reloaded.history().attempts, 3);
  EXPECT_EQ(reloaded.history().last_attempt, 4);
}

// A preemption 2 s into a 10 s backoff: the attempt record planned all 10 s, the end record says 8 were not waited.
// Only the 2 s count, and the invocation's wall time ends at its end record (it counted the whole backoff).
TEST_F(LedgerTest, ABackoffCutShortByAPreemptionCountsOnlyWhatWasWaited) {
  {
    Ledger ledger(path_);
    ledger.append(start(1000));
    ledger.append(attempt("crash", 10, 1000, 1001, 0.5, 0, 0, 0, 0, 0, 10));
    ledger.append(json::ObjectWriter()
                      .add("event", "end")
                      .add("time", 1003.0)
                      .add("exit_code", 75)
                      .add("backoff_unused_s", 8.0)
                      .str());
  }
  GoodputSummary s = summarize_ledger(path_);
  EXPECT_NEAR(s.backoff_s, 2.0, 1e-6);
  EXPECT_NEAR(s.wall_s, 3.0, 1e-6);
  const double attributed = s.productive_s + s.work_lost_s + s.detect_s + s.teardown_s + s.relaunch_s + s.load_s +
                            s.checkpoint_stall_s + s.backoff_s + s.requeue_wait_s + s.other_s;
  EXPECT_NEAR(attributed, s.wall_s, 1e-6);
}

// The checkpoints committed per tier add up over every attempt, across requeues; records without the counts (an
// older launcher, a program that does not report them) add none.
TEST_F(LedgerTest, CheckpointsCommittedAddUpPerTierOverEveryAttempt) {
  auto counted = [](const char* outcome, double start, long long shared, long long local) {
    return json::ObjectWriter()
        .add("event", "attempt")
        .add("outcome", outcome)
        .add("start", start)
        .add("end", start + 5)
        .add("shared_saves", shared)
        .add("local_saves", local)
        .str();
  };
  {
    Ledger ledger(path_);
    ledger.append(start(1000));
    ledger.append(counted("crash", 1000, 2, 9));
    ledger.append(attempt("crash", 10, 1006, 1010, 3, 0));  // no counts
    ledger.append(counted("preempted", 1011, 1, 4));
    ledger.append(end(1017, 75));
    ledger.append(start(1030));
    ledger.append(counted("success", 1030, 3, 0));
    ledger.append(end(1036, 0));
  }
  const GoodputSummary s = summarize_ledger(path_);
  EXPECT_EQ(s.shared_saves, 6);
  EXPECT_EQ(s.local_saves, 13);
  const std::string table = format_summary(s);
  EXPECT_NE(table.find("checkpoints committed: 6 shared, 13 node-local"), std::string::npos) << table;
}

// The checkpoints that ended attempts are a row of their own, taken out of the periodic stalls (the rows still add up
// to the wall time); a record whose final checkpoint claims more than its stalls counts its stalls only.
TEST_F(LedgerTest, FinalCheckpointsAreARowOfTheirOwnWithinTheStalls) {
  auto stalled = [](const char* outcome, double start, double stall, double final_s) {
    return json::ObjectWriter()
        .add("event", "attempt")
        .add("outcome", outcome)
        .add("start", start)
        .add("end", start + 10)
        .add("productive_s", 8.0)
        .add("checkpoint_stall_s", stall)
        .add("final_checkpoint_s", final_s)
        .str();
  };
  {
    Ledger ledger(path_);
    ledger.append(start(1000));
    ledger.append(stalled("crash", 1000, 0.5, 0));
    ledger.append(stalled("preempted", 1010, 1.75, 1.5));
    ledger.append(end(1020, 75));
    ledger.append(start(1020));
    ledger.append(stalled("success", 1020, 0.25, 4.0));  // claims more than its stalls
    ledger.append(end(1030, 0));
  }
  const GoodputSummary s = summarize_ledger(path_);
  EXPECT_NEAR(s.checkpoint_stall_s, 2.5, 1e-9);
  EXPECT_NEAR(s.final_checkpoint_s, 1.75, 1e-9) << "1.5, and 0.25 of the claimed 4";
  const std::string table = format_summary(s);
  EXPECT_NE(table.find("checkpoint stalls            0.75 s"), std::string::npos) << table;
  EXPECT_NE(table.find("final checkpoints            1.75 s"), std::string::npos) << table;
}

// The failures whose restart had to read the shared tier: judged by the first attempt after them that got as far as
// resuming (every failure since the previous resume counts); an attempt that does not say which tier it read counts as
// shared (a program that keeps its own checkpoints), and a fresh start after a failure (nothing saved yet) needed no
// tier. Failures not resumed from yet are counted apart.
class SharedTierRecoveries : public LedgerTest {
 protected:
  static std::string resumed(const char* outcome, long long step, const char* tier, double start) {
    json::ObjectWriter record;
    record.add("event", "attempt").add("outcome", outcome).add("start", start).add("end", start + 5);
    record.add("resumed_step", step);
    if (tier != nullptr) record.add("resumed_tier", tier);
    return record.str();
  }
};

TEST_F(SharedTierRecoveries, AreJudgedByTheNextResume) {
  {
    Ledger ledger(path_);
    ledger.append(start(0));
    ledger.append(resumed("crash", 0, nullptr, 0));         // fresh start, fails
    ledger.append(resumed("crash", 0, nullptr, 10));        // fresh again (nothing saved): no tier needed; fails
    ledger.append(resumed("crash", 20, "node-local", 20));  // node-local: covered; fails
    ledger.append(resumed("hang", -1, nullptr, 30));        // hung while loading: fails before resuming
    ledger.append(resumed("crash", 25, "shared", 40));      // shared: both failures before it needed it (2); fails
    ledger.append(resumed("preempted", 30, nullptr, 50));   // no tier named: shared (3)
    ledger.append(end(60, 75));
    ledger.append(start(70));
    ledger.append(resumed("success", 35, "shared", 70));  // after a preemption: no failure's
    ledger.append(end(80, 0));
  }
  const GoodputSummary s = summarize_ledger(path_);
  EXPECT_EQ(s.failures, 5);
  EXPECT_EQ(s.shared_tier_recoveries, 3);
  EXPECT_EQ(s.unresumed_failures, 0);
}

// A failure, then an attempt preempted before it resumed (no failure of its own), then the requeued job resumes from
// the shared tier: the failure needed it. A failure the ledger ends on is not judged yet.
TEST_F(SharedTierRecoveries, SurviveARequeueAndWaitForTheResume) {
  {
    Ledger ledger(path_);
    ledger.append(start(0));
    ledger.append(resumed("crash", 10, "node-local", 0));
    ledger.append(resumed("preempted", -1, nullptr, 10));
    ledger.append(end(20, 75));
    ledger.append(start(30));
    ledger.append(resumed("crash", 15, "shared", 30));
  }
  const GoodputSummary s = summarize_ledger(path_);
  EXPECT_EQ(s.failures, 2);
  EXPECT_EQ(s.shared_tier_recoveries, 1) << "the first crash, resumed from the shared tier after the requeue";
  EXPECT_EQ(s.unresumed_failures, 1) << "the last crash: no attempt after it yet";
}

TEST_F(LedgerTest, ADamagedLineIsReportedWithItsNumber) {
  std::ofstream(path_) << start(1) << "\n{\"event\":\"attempt\",\"outcome\":\n";
  try {
    Ledger ledger(path_);
    FAIL() << "expected UsageError";
  } catch (const UsageError& error) {  // the run directory cannot be continued: the message says what to do
    EXPECT_NE(std::string(error.what()).find("line 2"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("give another --run-dir"), std::string::npos) << error.what();
  }
}

// Each record is one write ending in its newline: a last line without one that is no record is an append cut short
// (a crash, a kill, a full disk). It is cut off, not a reason to refuse the run directory; a whole record without its
// newline is kept. Either way the next record starts a line of its own.
TEST_F(LedgerTest, AnUnfinishedLastRecordIsCutOffAndTheNextStartsItsOwnLine) {
  const std::string first = start(1) + "\n";
  const std::string torn = "{\"event\":\"attempt\",\"outc";
  std::ofstream(path_) << first << torn;
  EXPECT_NO_THROW(summarize_ledger(path_));
  {
    Ledger ledger(path_);
    EXPECT_EQ(ledger.history().invocations, 1);
    EXPECT_NE(ledger.repair_note().find(std::to_string(torn.size()) + " bytes"), std::string::npos)
        << ledger.repair_note();
    EXPECT_EQ(std::filesystem::file_size(path_), first.size()) << "only the torn bytes are cut";
    ledger.append(start(2));
  }
  Ledger again(path_);
  EXPECT_EQ(again.history().invocations, 2);
  EXPECT_TRUE(again.repair_note().empty());
}

// A last line without its newline that does not start a record is no torn append (another program's text, a hand
// edit): refused, not cut.
TEST_F(LedgerTest, AnUnterminatedLastLineThatIsNoRecordIsRefusedNotCut) {
  const std::string text = start(1) + "\nnot a record";
  std::ofstream(path_) << text;
  EXPECT_THROW(Ledger ledger(path_), UsageError);
  EXPECT_EQ(std::filesystem::file_size(path_), text.size());
}

TEST_F(LedgerTest, AWholeLastRecordWithoutItsNewlineIsKept) {
  std::ofstream(path_) << start(1);
  {
    Ledger ledger(path_);
    EXPECT_EQ(ledger.history().invocations, 1);
    EXPECT_TRUE(ledger.repair_note().empty()) << ledger.repair_note();
    ledger.append(start(2));
  }
  EXPECT_EQ(Ledger(path_).history().invocations, 2);
}

TEST_F(LedgerTest, AFieldOfTheWrongKindIsReportedWithTheLineAndKey) {
  std::ofstream(path_) << start(1) << "\n{\"event\":\"end\",\"time\":\"late\",\"exit_code\":0}\n";
  try {
    summarize_ledger(path_);
    FAIL() << "expected IoError";
  } catch (const IoError& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("line 2"), std::string::npos) << what;
    EXPECT_NE(what.find("member 'time'"), std::string::npos) << what;
    EXPECT_NE(what.find("expected a number, found the string \"late\""), std::string::npos) << what;
  }
}

// What the launcher writes is read back exactly: strings with quotes and control characters, 64-bit integers, doubles
// to the last bit, null for absent times.
TEST_F(LedgerTest, RecordsRoundTripThroughTheLedger) {
  const double time = 1763832000.123456789;
  {
    Ledger ledger(path_);
    ledger.append(json::ObjectWriter()
                      .add("event", "end")
                      .add("time", time)
                      .add("exit_code", 70)
                      .add("reason", "gave up: \"rank 1\"\tfailed\n")
                      .add_null("slurm_job_id")
                      .add("big", std::int64_t{9007199254740993})
                      .str());
  }
  std::ifstream in(path_);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(text.back(), '\n');
  const auto record = json::Value::parse(text);
  EXPECT_EQ(record.at("time").number(), time);
  EXPECT_EQ(record.at("reason").string(), "gave up: \"rank 1\"\tfailed\n");
  EXPECT_TRUE(record.at("slurm_job_id").is_null());
  EXPECT_EQ(record.at("big").i64(), 9007199254740993);  // not representable as a double
  EXPECT_NEAR(summarize_ledger(path_).wall_s, 0, 1e-9);
}

// The ledger's strings come from outside (arguments, the ranks' output, scontrol); its reader refuses text that is not
// UTF-8, which once made a whole run directory unreadable.
TEST(LedgerText, KeepsUtf8AndReplacesEveryOtherByte) {
  const std::string fffd = "\xEF\xBF\xBD";
  for (const std::string& valid :
       std::vector<std::string>{"", "plain", "caf\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xED\x9F\xBF",
                                "\xF4\x8F\xBF\xBF", std::string("nul\0byte", 8)}) {
    EXPECT_EQ(ledger_text(valid), valid);
  }
  EXPECT_EQ(ledger_text("n\xFF\xFE"
                        "1"),
            "n" + fffd + fffd + "1");
  EXPECT_EQ(ledger_text("\xC0\xAF"), fffd + fffd) << "overlong";
  EXPECT_EQ(ledger_text("\xED\xA0\x80"), fffd + fffd + fffd) << "surrogate";
  EXPECT_EQ(ledger_text("\xE2\x82"), fffd + fffd) << "truncated";
  EXPECT_EQ(ledger_text("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd) << "above U+10FFFF";
  EXPECT_EQ(ledger_text("\xE2\x82x"), fffd + fffd + "x");
  const std::string line = json::ObjectWriter().add("s", ledger_text("a\xFF\x80\xC3")).str();
  EXPECT_EQ(json::Value::parse(line).at("s").string(), "a" + fffd + fffd + fffd);
}

}  // namespace
}  // namespace tenax::launch
