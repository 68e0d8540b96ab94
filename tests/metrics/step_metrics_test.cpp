// StepMetrics over real MPI ranks: accounting, outputs, restarts, misuse.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <unistd.h>

#include "common/mpi_test.hpp"
#include "prometheus_parser.hpp"
#include "run_dir.hpp"
#include "tenax/build_config.hpp"
#include "tenax/error.hpp"
#include "tenax/metrics.hpp"

namespace tenax::metrics {
namespace {

using test::world;
using namespace std::chrono_literals;

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

double phase_seconds(const Summary& s, Phase p) {
  return s.phase_fraction[static_cast<std::size_t>(p)] * s.mean_step_seconds;
}

int run_checker(const std::string& args) {
  const std::string command = "/usr/bin/python3 " TENAX_METRICS_TEST_SOURCE_DIR "/check_outputs.py " + args;
  return std::system(command.c_str());
}

Options options_for(const std::string& dir, int every) {
  Options o;
  o.run_dir = dir;
  o.every = every;
  return o;
}

TEST(StepMetrics, PhasesAddUpToTheStepTime) {
  const test::RunDir run_dir("accounting");
  const std::string& dir = run_dir.path();
  StepMetrics metrics(world(), options_for(dir, 4));
  EXPECT_FALSE(metrics.device_timing());
  for (int step = 0; step < 10; ++step) {
    metrics.begin_step(step);
    {
      auto t = metrics.measure(Phase::DataWait);
      sleep_ms(3);
    }
    {
      auto t = metrics.measure(Phase::Compute);
      sleep_ms(8);
      {
        auto c = metrics.measure(Phase::Comm);  // nested: counts as comm only
        world().barrier();
        sleep_ms(2);
      }
    }
    sleep_ms(2);  // not attributed: other
    {
      auto t = metrics.measure(Phase::Optimizer);
      sleep_ms(1);
    }
    metrics.end_step();
  }
  const Summary s = metrics.finish();
  EXPECT_EQ(s.steps, 10);
  double sum = 0;
  for (double f : s.phase_fraction)
    sum += f;
  EXPECT_NEAR(sum, 1.0, 1e-9);
  // Each phase holds at least what was done in it and not much more (sleeps overshoot on a busy machine).
  EXPECT_GE(phase_seconds(s, Phase::DataWait), 0.003);
  EXPECT_GE(phase_seconds(s, Phase::Compute), 0.008);
  EXPECT_LT(phase_seconds(s, Phase::Compute), 0.008 + 0.030);
  EXPECT_GE(phase_seconds(s, Phase::Comm), 0.002);
  EXPECT_GE(phase_seconds(s, Phase::Other), 0.002);
  EXPECT_GE(phase_seconds(s, Phase::Optimizer), 0.001);
  EXPECT_EQ(phase_seconds(s, Phase::HostToDevice), 0.0);
  EXPECT_EQ(phase_seconds(s, Phase::Checkpoint), 0.0);
  EXPECT_GE(s.mean_step_seconds, 0.016);
  EXPECT_NEAR(s.step_efficiency, s.phase_fraction[static_cast<std::size_t>(Phase::Compute)], 1e-12);
  if (world().rank() == 0) {
    EXPECT_EQ(run_checker("steps " + dir + "/metrics/steps.jsonl 10 " + std::to_string(world().size())), 0);
  }
}

TEST(StepMetrics, PrometheusTraceAndSummaryFilesAreWritten) {
  const test::RunDir run_dir("outputs");
  const std::string& dir = run_dir.path();
  Options o = options_for(dir, 5);
  o.trace_first = 3;
  o.trace_end = 6;
  {
    StepMetrics metrics(world(), o);
    for (int step = 0; step < 12; ++step) {
      metrics.begin_step(step);
      {
        auto t = metrics.measure(Phase::DataWait);
        sleep_ms(1);
      }
      {
        auto t = metrics.measure(Phase::Compute);
        sleep_ms(2);
      }
      metrics.end_step();
    }
    metrics.finish();
  }
  const std::string m = dir + "/metrics";
  if (world().rank() == 0) {
    const test::PromParse prom = test::parse_prometheus(test::read_text(m + "/tenax.prom"));
    ASSERT_TRUE(prom.ok) << prom.error;
    EXPECT_EQ(prom.value("tenax_steps_total"), 12);
    EXPECT_EQ(prom.value("tenax_last_step"), 11);
    EXPECT_EQ(prom.value("tenax_ranks"), world().size());
    EXPECT_GT(prom.value("tenax_phase_seconds_total", {{"phase", "compute"}}), 12 * 0.002 * 0.99);
    EXPECT_EQ(prom.families.at("tenax_rank_busy_seconds").samples.size(), static_cast<std::size_t>(world().size()));
    EXPECT_FALSE(std::filesystem::exists(m + "/tenax.prom.tmp." + std::to_string(::getpid())));
    // promtool: Prometheus's own checker (scripts/install-deps.sh installs it).
    EXPECT_EQ(std::system(("promtool check metrics < " + m + "/tenax.prom").c_str()), 0);
    EXPECT_EQ(run_checker("trace " + m + "/trace-steps3-6-attempt1.json " + std::to_string(world().size()) + " 3 6"),
              0);
    EXPECT_EQ(run_checker("steps " + m + "/steps.jsonl 12 " + std::to_string(world().size())), 0);
    const std::string summary = test::read_text(m + "/summary-attempt1.txt");
    EXPECT_NE(summary.find("step efficiency"), std::string::npos) << summary;
    EXPECT_NE(summary.find("goodput"), std::string::npos) << summary;
    EXPECT_EQ(run_checker("steps " + m + "/steps.jsonl 12 " + std::to_string(world().size())), 0);
  }
  world().barrier();

  // A restart in the same run directory is attempt 2: it appends, and keeps attempt 1's files as they were.
  const std::string first_summary = world().rank() == 0 ? test::read_text(m + "/summary-attempt1.txt") : "";
  {
    StepMetrics metrics(world(), o);
    for (int step = 10; step < 13; ++step) {
      metrics.begin_step(step);
      metrics.end_step();
    }
    const Summary s = metrics.finish();
    EXPECT_EQ(s.steps, 3);
    EXPECT_NE(s.table.find("attempt 2"), std::string::npos) << s.table;
  }
  if (world().rank() == 0) {
    EXPECT_EQ(test::read_text(m + "/summary-attempt1.txt"), first_summary);
    EXPECT_TRUE(std::filesystem::exists(m + "/summary-attempt2.json"));
    int starts = 0;
    for (const std::string& line : test::read_lines(m + "/steps.jsonl"))
      starts += line.rfind("{\"event\":\"start\",\"attempt\":", 0) == 0;
    EXPECT_EQ(starts, 2);
    EXPECT_EQ(run_checker("steps " + m + "/steps.jsonl 15 " + std::to_string(world().size())), 0);
  }
}

TEST(StepMetrics, GoodputComesFromTheLaunchersLedger) {
  const test::RunDir run_dir("goodput");
  const std::string& dir = run_dir.path();
  if (world().rank() == 0) {
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::ofstream(dir + "/ledger.jsonl") << std::fixed << "{\"event\":\"start\",\"time\":" << now - 100 << "}\n"
                                         << "{\"event\":\"attempt\",\"attempt\":1,\"start\":" << now - 99
                                         << ",\"end\":" << now - 50 << ",\"productive_s\":40,\"work_lost_s\":10}\n";
  }
  world().barrier();
  StepMetrics metrics(world(), options_for(dir, 10));
  metrics.begin_step(0);
  metrics.end_step();
  const Summary s = metrics.finish();
  ASSERT_TRUE(s.goodput.has_value());
  EXPECT_EQ(s.attempts, 2);
  // 30 s kept of ~100 s since the first start (plus this attempt's few microseconds of steps).
  EXPECT_NEAR(*s.goodput, 0.30, 0.01);
}

TEST(StepMetrics, DifferentStepsOnRanksAreAUsageErrorEverywhere) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  StepMetrics metrics(world(), options_for("", 2));
  const int offset = world().rank() == 1 ? 100 : 0;
  metrics.begin_step(offset);
  metrics.end_step();
  metrics.begin_step(offset + 1);
  EXPECT_THROW(metrics.end_step(), UsageError);
}

TEST(StepMetrics, MisuseIsAUsageError) {
  StepMetrics metrics(world(), options_for("", 100));
  EXPECT_THROW(metrics.enter(Phase::Compute), UsageError);
  EXPECT_THROW(metrics.end_step(), UsageError);
  metrics.begin_step(0);
  EXPECT_THROW(metrics.begin_step(1), UsageError);
  metrics.end_step();
  Options bad;
  bad.every = 0;
  EXPECT_THROW(StepMetrics(world(), bad), UsageError);
  bad = Options{};
  bad.trace_first = 5;
  bad.trace_end = 5;
  EXPECT_THROW(StepMetrics(world(), bad), UsageError);
#if !TENAX_HAVE_CUDA
  int not_a_stream = 0;
  bad = Options{};
  bad.cuda_stream = &not_a_stream;
  EXPECT_THROW(StepMetrics(world(), bad), UsageError);
#endif
  metrics.finish();
  EXPECT_THROW(metrics.finish(), UsageError);
}

TEST(StepMetrics, UnwritableRunDirFailsOnEveryRank) {
  const test::RunDir run_dir("unwritable");
  const std::string& dir = run_dir.path();
  if (world().rank() == 0) std::ofstream(dir + "/metrics") << "a file where the directory should be";
  world().barrier();
  EXPECT_THROW(StepMetrics(world(), options_for(dir, 10)), IoError);
}

TEST(StepMetrics, DisabledMetricsDoNothing) {
  const test::RunDir run_dir("disabled");
  const std::string& dir = run_dir.path();
  Options o = options_for(dir, 1);
  o.enabled = false;
  StepMetrics metrics(world(), o);
  metrics.begin_step(0);
  { auto t = metrics.measure(Phase::Compute); }
  metrics.end_step();
  EXPECT_EQ(metrics.finish().steps, 0);
  EXPECT_FALSE(std::filesystem::exists(dir + "/metrics"));
}

}  // namespace
}  // namespace tenax::metrics
