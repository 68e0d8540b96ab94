// The strict JSON object reader and goodput from the launcher's ledger.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "metrics/json_text.hpp"
#include "metrics/ledger.hpp"

namespace tenax::metrics::detail {
namespace {

TEST(MetricsJson, ReadsFlatObjectsAndSkipsNestedValues) {
  std::string error;
  const auto m = parse_flat_object(
      R"({"event":"attempt","attempt":2,"start":1.5e9,"end":null,"ok":true,"nested":{"a":[1,2,{"b":"}"}]},"s":"q\"x"})",
      error);
  ASSERT_TRUE(m) << error;
  EXPECT_EQ(std::get<std::string>(m->at("event")), "attempt");
  EXPECT_EQ(std::get<double>(m->at("attempt")), 2);
  EXPECT_EQ(std::get<double>(m->at("start")), 1.5e9);
  EXPECT_TRUE(std::holds_alternative<std::nullptr_t>(m->at("end")));
  EXPECT_EQ(std::get<bool>(m->at("ok")), true);
  EXPECT_EQ(std::get<std::string>(m->at("s")), "q\"x");
}

TEST(MetricsJson, RejectsMalformedText) {
  for (const char* bad : {"", "{", "{\"a\":1", "{\"a\":01}", "{\"a\":1} x", "{a:1}", "{\"a\":tru}", "{\"a\":\"x}",
                          "[1]", "{\"a\":1,}", "{\"a\":-}", "{\"a\":1.}"}) {
    std::string error;
    EXPECT_FALSE(parse_flat_object(bad, error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST(MetricsJson, WritesEscapedStringsAndFiniteNumbers) {
  EXPECT_EQ(json_string("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  EXPECT_EQ(json_number(0.25), "0.25");
  EXPECT_EQ(json_number(1.0 / 0.0), "null");
}

class MetricsLedger : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(TENAX_METRICS_TEST_TMP) / "ledger";
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  std::string write(const std::string& text) {
    const auto path = dir_ / "ledger.jsonl";
    std::ofstream(path) << text;
    return path.string();
  }
  std::filesystem::path dir_;
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

}  // namespace
}  // namespace tenax::metrics::detail
