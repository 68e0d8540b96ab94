// The Prometheus textfile: checked by the strict parser written for these tests and by promtool, Prometheus's own
// checker (scripts/install-deps.sh installs it).
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

// Under Slurm every series carries the job, user and step, so that a site can join them with its per-job GPU telemetry.
TEST(MetricsPrometheus, UnderSlurmEverySeriesNamesTheJobUserAndStep) {
  ::unsetenv("SLURM_JOB_ID");
  EXPECT_TRUE(slurm_job_labels().empty()) << "labels outside Slurm";
  ::setenv("SLURM_JOB_ID", "4242", 1);
  ::setenv("SLURM_JOB_USER", "ada \"l\"", 1);
  ::setenv("SLURM_STEP_ID", "3", 1);
  PromSnapshot s = snapshot();
  s.job_labels = slurm_job_labels();
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"job", "4242"}, {"user", "ada \"l\""}, {"step", "3"}};
  EXPECT_EQ(s.job_labels, expected);
  const test::PromParse p = test::parse_prometheus(format_prometheus(s));
  ASSERT_TRUE(p.ok) << p.error;
  for (const auto& [name, family] : p.families)
    for (const auto& sample : family.samples) {
      EXPECT_EQ(sample.labels.at("job"), "4242") << name;
      EXPECT_EQ(sample.labels.at("user"), "ada \"l\"") << name;
      EXPECT_EQ(sample.labels.at("step"), "3") << name;
    }
  EXPECT_EQ(p.value("tenax_rank_busy_seconds", {{"rank", "2"}, {"job", "4242"}}), 0.15);
  // An array task is named as squeue names it; a hostile value is cut, not copied whole into every series.
  ::setenv("SLURM_ARRAY_JOB_ID", "4240", 1);
  ::setenv("SLURM_ARRAY_TASK_ID", "2", 1);
  ::setenv("SLURM_STEP_ID", std::string(100000, 'x').c_str(), 1);
  const auto labels = slurm_job_labels();
  EXPECT_EQ(labels.at(0).second, "4240_2");
  EXPECT_EQ(labels.at(2).second.size(), 256u);
  for (const char* name :
       {"SLURM_JOB_ID", "SLURM_JOB_USER", "SLURM_STEP_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"})
    ::unsetenv(name);
}

TEST(MetricsPrometheus, PromtoolAcceptsTheFile) {
  ASSERT_EQ(std::system("command -v promtool >/dev/null 2>&1"), 0)
      << "promtool is not installed: scripts/install-deps.sh unpacks it from Debian's prometheus package";
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
