// Goodput from the launcher's ledger, read with core's strict JSON reader (its own tests are tests/unit/json_test.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "metrics/ledger.hpp"
#include "scratch_dir.hpp"

namespace tenax::metrics::detail {
namespace {

class MetricsLedger : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    const auto path = dir_ / "ledger.jsonl";
    std::ofstream(path) << text;
    return path.string();
  }
  test::ScratchDir scratch_;  // this case's own: ctest runs the cases in parallel processes
  const std::filesystem::path& dir_ = scratch_.path();
};

TEST_F(MetricsLedger, MissingLedgerGivesNoGoodput) {
  EXPECT_FALSE(compute_goodput(read_ledger((dir_ / "absent.jsonl").string()), 10, 2000));
}

// Lines as tenax-launch writes them (only the fields goodput needs are checked; the others are ignored).
TEST_F(MetricsLedger, GoodputOverAttemptsAndThisOne) {
  const std::string path = write(
      R"({"event":"start","time":1000,"invocation":1,"mode":"local","ranks":2}
{"event":"attempt","invocation":1,"attempt":1,"start":1001,"end":1101,"outcome":"crash","productive_s":80,"work_lost_s":20,"checkpoint_stall_s":1}
this line is not JSON
{"event":"attempt","invocation":1,"attempt":2,"start":1110,"end":1200,"outcome":"preempted","productive_s":50,"work_lost_s":0}
{"event":"end","time":1201,"invocation":1,"exit_code":75}
{"event":"attempt","attempt":3}
)");
  const Ledger ledger = read_ledger(path);
  ASSERT_EQ(ledger.attempts.size(), 2u);  // the malformed line and the incomplete record are skipped
  EXPECT_EQ(ledger.first_time, 1000);
  const auto g = compute_goodput(ledger, 40, 1300);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->attempts, 2);
  EXPECT_DOUBLE_EQ(g->productive_s, (80 - 20) + 50 + 40);
  EXPECT_DOUBLE_EQ(g->lost_s, 20);
  EXPECT_DOUBLE_EQ(g->wall_s, 300);
  EXPECT_DOUBLE_EQ(g->goodput, 150.0 / 300.0);
}

TEST_F(MetricsLedger, ALaterLineForTheSameAttemptReplacesTheEarlierOne) {
  const std::string path = write(
      "{\"event\":\"attempt\",\"attempt\":1,\"start\":10,\"end\":20,\"productive_s\":1}\n"
      "{\"event\":\"attempt\",\"attempt\":1,\"start\":10,\"end\":30,\"productive_s\":15}\n");
  const Ledger ledger = read_ledger(path);
  ASSERT_EQ(ledger.attempts.size(), 1u);
  EXPECT_EQ(ledger.attempts[0].productive_s, 15);
}

// Whatever a ledger line holds besides the fields goodput reads (nested values, \u escapes, 64-bit integers, fields of
// other kinds) does not stop it from being read; a line that is not one JSON object is skipped.
TEST_F(MetricsLedger, LinesAreReadStrictlyButOnlyTheNeededFieldsMatter) {
  const std::string path = write(
      R"({"event":"start","time":500,"host":"n\u00e9\ud83d\ude00","nested":{"a":[1,{"b":null}]},"big":18446744073709551615}
{"event":"attempt","attempt":1,"start":501,"end":601,"productive_s":50,"work_lost_s":"n/a","extra":[true,false]}
{"event":"attempt","attempt":2,"start":602,"end":700,"productive_s":40,"work_lost_s":5,}
["event","attempt"]
{"event":"attempt","attempt":2,"start":602,"end":700,"productive_s":40,"work_lost_s":5} trailing
{"event":"attempt","attempt":2.5,"start":602,"end":700}
{"event":"attempt","attempt":3,"start":602,"end":700,"productive_s":1e400}
)");
  const Ledger ledger = read_ledger(path);
  ASSERT_EQ(ledger.attempts.size(), 2u);  // the trailing comma, the array, the trailing text and 2.5 are skipped
  EXPECT_EQ(ledger.first_time, 500);
  EXPECT_EQ(ledger.attempts[0].attempt, 1);
  EXPECT_EQ(ledger.attempts[0].productive_s, 50);
  EXPECT_EQ(ledger.attempts[0].work_lost_s, 0);  // not a number: not there
  EXPECT_EQ(ledger.attempts[1].attempt, 3);
  EXPECT_EQ(ledger.attempts[1].productive_s, 0);  // beyond a double: not there
}

}  // namespace
}  // namespace tenax::metrics::detail
