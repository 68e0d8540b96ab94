// The two diagnoses that need real concurrency: a starved step loop (a real DataLoader feeding it) and a slow rank
// among real MPI ranks that synchronise every step.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "common/mpi_test.hpp"
#include "run_dir.hpp"
#include "tenax/data_loader.hpp"
#include "tenax/metrics.hpp"

namespace tenax::metrics {
namespace {

using test::world;

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

struct LoopResult {
  Summary summary;
  DataLoaderStats loader;
};

// A step loop with one batch per step and `compute_ms` of work, fed by a loader whose producer needs `produce_ms`.
LoopResult run_loop(int produce_ms, int workers, int prefetch, int compute_ms, int steps) {
  Options o;
  o.every = 8;
  StepMetrics metrics(world(), o);
  DataLoader loader({.batch_bytes = 64 * 1024, .workers = workers, .prefetch = prefetch},
                    [produce_ms](std::int64_t index, std::span<std::byte> out) {
                      std::memset(out.data(), static_cast<int>(index & 0xff), out.size());
                      if (produce_ms > 0) sleep_ms(produce_ms);
                    });
  for (int step = 0; step < steps; ++step) {
    metrics.begin_step(step);
    Batch batch;
    {
      auto t = metrics.measure(Phase::DataWait);
      batch = loader.next();
    }
    EXPECT_EQ(batch.index, step);
    {
      auto t = metrics.measure(Phase::Compute);
      sleep_ms(compute_ms);
    }
    metrics.end_step();
  }
  return {metrics.finish(), loader.stats()};
}

TEST(Starvation, SlowLoaderIsReportedAsStarved) {
  // One worker needing 25 ms per batch against 5 ms of compute: the step waits ~20 ms for every batch.
  const LoopResult r = run_loop(25, 1, 2, 5, 16);
  EXPECT_GT(r.summary.starvation, 0.5) << r.summary.table;
  EXPECT_LT(r.summary.step_efficiency, 0.4) << r.summary.table;
  ASSERT_FALSE(r.summary.advice.empty());
  EXPECT_EQ(r.summary.advice[0].rfind("data-bound: raise loader workers", 0), 0u) << r.summary.table;
  // The metrics' data wait (a mean over ranks) is the loaders' own measure of their consumer's wait (plus the call).
  double loader_wait = 0;
  world().all_reduce(&r.loader.wait_seconds, &loader_wait, 1, DType::F64, ReduceOp::Avg);
  const double metrics_wait = r.summary.starvation * r.summary.mean_step_seconds * 16;
  EXPECT_GE(metrics_wait, loader_wait * 0.999);
  EXPECT_LT(metrics_wait - loader_wait, 16 * 0.002);
}

TEST(Starvation, FastLoaderIsNot) {
  // Producing is nearly free and four batches are prepared ahead: the step never waits.
  const LoopResult r = run_loop(0, 2, 4, 5, 16);
  EXPECT_LT(r.summary.starvation, 0.1) << r.summary.table;
  EXPECT_GT(r.summary.step_efficiency, 0.8) << r.summary.table;
  for (const std::string& a : r.summary.advice)
    EXPECT_EQ(a.find("data-bound"), std::string::npos) << a;
}

TEST(Stragglers, InjectedSlowRankIsNamedWithItsHost) {
  if (world().size() < 2) GTEST_SKIP() << "needs at least two ranks";
  const test::RunDir run_dir("straggler");
  const std::string& dir = run_dir.path();
  const int slow = world().size() - 1;
  Options o;
  o.run_dir = dir;
  o.every = 5;
  o.straggler_threshold = 0.2;
  StepMetrics metrics(world(), o);
  for (int step = 0; step < 10; ++step) {
    metrics.begin_step(step);
    {
      auto t = metrics.measure(Phase::Compute);
      sleep_ms(world().rank() == slow ? 35 : 10);
    }
    {
      // A real collective: everyone waits here for the slow rank, so every rank's step takes as long as its step.
      auto t = metrics.measure(Phase::Comm);
      float x = 1.0f, sum = 0.0f;
      world().all_reduce(&x, &sum, 1, DType::F32, ReduceOp::Sum);
      EXPECT_EQ(sum, static_cast<float>(world().size()));
    }
    metrics.end_step();
    if (step == 4 || step == 9) {
      // Every rank sees the same verdict after each window.
      ASSERT_EQ(metrics.stragglers().size(), 1u) << "window ending at step " << step;
      const Straggler& s = metrics.stragglers()[0];
      EXPECT_EQ(s.rank, slow);
      char host[256] = {};
      ::gethostname(host, sizeof host - 1);
      EXPECT_EQ(s.host, host);
      EXPECT_GT(s.excess, 0.4);  // ~35 ms against a median of ~10 ms (3+ ranks) or ~22 ms (2 ranks)
      EXPECT_GT(s.busy_seconds, 0.035);
    }
  }
  const Summary summary = metrics.finish();
  bool advised = false;
  for (const std::string& a : summary.advice)
    advised |=
        a.rfind("straggler: rank " + std::to_string(slow) + " ", 0) == 0 && a.find("in 2 of 2") != std::string::npos;
  EXPECT_TRUE(advised) << summary.table;
  if (world().rank() == 0) {
    int reports = 0;
    for (const std::string& line : test::read_lines(dir + "/metrics/steps.jsonl"))
      reports += line.find("\"event\":\"stragglers\"") != std::string::npos &&
                 line.find("\"ranks\":[{\"rank\":" + std::to_string(slow) + ",") != std::string::npos;
    EXPECT_EQ(reports, 2);
  }
}

}  // namespace
}  // namespace tenax::metrics
