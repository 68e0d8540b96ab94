// The Prometheus textfile: checked by the strict parser written for these tests and, where installed, by promtool.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "metrics/outputs.hpp"
#include "prometheus_parser.hpp"
#include "scratch_dir.hpp"

namespace tenax::metrics::detail {
namespace {

PromSnapshot snapshot() {
  PromSnapshot s;
  s.run = "run \"7\"";  // a label value that needs escaping
  s.identity = RunIdentity{2, 3, "host"};
  s.steps_total = 300;
  s.last_step = 299;
  s.step_seconds_total = 30;
  s.phase_seconds_total[index_of(Phase::Compute)] = 21;
  s.phase_seconds_total[index_of(Phase::DataWait)] = 9;
  s.window_step = Stat{0.09, 0.1, 0.12, 0.1};
  s.window_phase_fraction[index_of(Phase::Compute)] = 0.7;
  s.window_phase_fraction[index_of(Phase::DataWait)] = 0.3;
  s.busy_per_rank = {0.1, 0.1, 0.15};
  s.hosts = {"n0", "n1", "n\\2"};
  s.stragglers = 1;
  s.unix_time = 1795000000.25;
  return s;
}

TEST(MetricsPrometheus, FormatParsesStrictlyWithTheExpectedValues) {
  const std::string text = format_prometheus(snapshot());
  const test::PromParse p = test::parse_prometheus(text);
  ASSERT_TRUE(p.ok) << p.error << "\n" << text;
  EXPECT_EQ(p.families.at("tenax_steps_total").type, "counter");
  EXPECT_EQ(p.value("tenax_steps_total"), 300);
  EXPECT_EQ(p.value("tenax_phase_seconds_total", {{"phase", "data_wait"}}), 9);
  EXPECT_EQ(p.value("tenax_step_seconds", {{"stat", "max"}}), 0.12);
  EXPECT_EQ(p.value("tenax_starvation_fraction"), 0.3);
  EXPECT_EQ(p.value("tenax_step_efficiency"), 0.7);
  EXPECT_EQ(p.value("tenax_rank_busy_seconds", {{"rank", "2"}, {"host", "n\\2"}}), 0.15);
  EXPECT_EQ(p.value("tenax_attempt", {{"run", "run \"7\""}}), 2);
  EXPECT_EQ(p.value("tenax_metrics_updated_seconds"), 1795000000.25);
  for (const auto& [name, family] : p.families) {
    EXPECT_FALSE(family.help.empty()) << name;
    EXPECT_NE(family.type, "untyped") << name;
  }
}

TEST(MetricsPrometheus, PromtoolAcceptsTheFile) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) GTEST_SKIP() << "promtool is not installed";
  const test::ScratchDir dir;
  const auto path = dir.path() / "tenax.prom";
  std::ofstream(path) << format_prometheus(snapshot());
  const std::string command = "promtool check metrics < " + path.string() + " 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

// The parser itself must fail on what the textfile collector rejects; otherwise the test above proves nothing.
TEST(MetricsPrometheus, StrictParserRejectsBrokenFiles) {
  const char* broken[] = {
      "x 1",                                                       // no final newline
      "# TYPE x gauge\nx{a=\"1} 1\n",                              // unterminated label value
      "# TYPE x gauge\nx{a=1} 1\n",                                // unquoted label value
      "# TYPE x gauge\nx one\n",                                   // bad value
      "# TYPE x gauge\nx 1\n# TYPE x gauge\n",                     // second TYPE
      "# TYPE x gauge\nx 1\n# TYPE y gauge\ny 1\nx{a=\"b\"} 2\n",  // family not contiguous
      "# TYPE x gauge\nx 1\nx 2\n",                                // duplicate series
      "# TYPE x counter\nx -1\n",                                  // negative counter
      "# TYPE x flow\nx 1\n",                                      // unknown type
      "# TYPE 1x gauge\n1x 1\n",                                   // bad metric name
      "# TYPE x gauge\nx{__a=\"b\"} 1\n",                          // reserved label name
      "# TYPE x gauge\nx{a=\"\\t\"} 1\n",                          // bad escape
      "# TYPE x gauge\nx 1\n# HELP x late\n",                      // HELP after samples
  };
  for (const char* text : broken)
    EXPECT_FALSE(test::parse_prometheus(text).ok) << text;
  EXPECT_TRUE(test::parse_prometheus("# HELP x h\n# TYPE x gauge\nx{a=\"b\",} NaN\n").ok);
}

}  // namespace
}  // namespace tenax::metrics::detail
