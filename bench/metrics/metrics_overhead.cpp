// tenax-bench-metrics: what measuring costs.
//
//   mpirun -n 2 tenax-bench-metrics [--step-ms 20] [--steps 20] [--rounds 30] [--every 100]
//
// The step loop has the example's shape: a batch from a DataLoader, a compute phase of fixed arithmetic (calibrated
// to --step-ms), an all-reduce, an optimizer phase, a checkpoint check. Blocks of --steps steps run alternately without
// metrics (the reference: the same loop compiled without a single metrics call) and with StepMetrics writing every
// output (steps.jsonl, the Prometheus file, a gather and a straggler check every --every steps), so both see the same
// machine state; the overhead is the median over rounds of the per-round ratio. A second table gives the cost of each
// operation alone, and the overhead those costs predict.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cxxopts.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "tenax/data_loader.hpp"
#include "tenax/metrics.hpp"
#include "tenax/runtime.hpp"

namespace {

using tenax::metrics::Phase;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The q-quantile (0 <= q <= 1) by linear interpolation between order statistics.
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}
double median(const std::vector<double>& v) {
  return quantile(v, 0.5);
}

// Fixed arithmetic over a cache-resident buffer: the compute phase. Returns a value so it cannot be optimised away.
float compute(std::vector<float>& data, int repeats) {
  float acc = 0;
  for (int r = 0; r < repeats; ++r)
    for (float& x : data) {
      x = x * 0.999f + 0.001f;
      acc += x;
    }
  return acc;
}

// What the step loop holds in place of a scope when it runs without metrics.
struct NoScope {};

template <bool kMeasured>
auto scope(tenax::metrics::StepMetrics& m, Phase p) {
  if constexpr (kMeasured)
    return m.measure(p);
  else
    return NoScope{};
}

struct Loop {
  tenax::Communicator& world;
  tenax::DataLoader& loader;
  tenax::metrics::StepMetrics& metrics;
  std::vector<float> data = std::vector<float>(64 * 1024, 1.0f);
  int repeats = 1;
  float sink = 0;

  // One step; without kMeasured, the same step without a single metrics call.
  template <bool kMeasured>
  void step(std::int64_t s) {
    if constexpr (kMeasured) metrics.begin_step(s);
    tenax::Batch batch;
    {
      [[maybe_unused]] auto t = scope<kMeasured>(metrics, Phase::DataWait);
      batch = loader.next();
    }
    {
      [[maybe_unused]] auto t = scope<kMeasured>(metrics, Phase::Compute);
      sink += compute(data, repeats) + static_cast<float>(batch.host[0]);
    }
    {
      [[maybe_unused]] auto t = scope<kMeasured>(metrics, Phase::Comm);
      float in = sink, out = 0;
      world.all_reduce(&in, &out, 1, tenax::DType::F32, tenax::ReduceOp::Max);
      sink = out * 1e-9f;
    }
    {
      [[maybe_unused]] auto t = scope<kMeasured>(metrics, Phase::Optimizer);
      for (std::size_t i = 0; i < 1024; ++i)
        data[i] += 1e-6f;
    }
    { [[maybe_unused]] auto t = scope<kMeasured>(metrics, Phase::Checkpoint); }
    if constexpr (kMeasured) metrics.end_step();
  }
};

int body(int argc, char** argv) {
  tenax::Runtime runtime(argc, argv);
  cxxopts::Options cli("tenax-bench-metrics", "Step-time overhead of tenax step metrics (run under mpirun)");
  auto add = cli.add_options();
  add("step-ms", "compute time per step to calibrate to (ms)", cxxopts::value<double>()->default_value("20"));
  add("steps", "steps per block", cxxopts::value<int>()->default_value("20"));
  add("rounds", "alternating off/on block pairs", cxxopts::value<int>()->default_value("30"));
  add("every", "TENAX_METRICS_EVERY of the measured blocks", cxxopts::value<int>()->default_value("100"));
  add("h,help", "this help");
  const auto args = cli.parse(argc, argv);
  if (args.count("help")) {
    if (runtime.rank() == 0) std::puts(cli.help().c_str());
    return 0;
  }
  const double step_ms = args["step-ms"].as<double>();
  const int steps = args["steps"].as<int>();
  const int rounds = args["rounds"].as<int>();
  const int every = args["every"].as<int>();
  tenax::Communicator& world = runtime.world();

  // Every output is written, as in a real run, into a scratch run directory removed at the end.
  const std::string run_dir =
      (std::filesystem::temp_directory_path() / ("tenax-bench-metrics-" + std::to_string(::getppid()))).string();
  tenax::metrics::Options options;
  options.run_dir = run_dir;
  options.every = every;
  tenax::metrics::StepMetrics metrics(world, options);
  tenax::DataLoader loader({.batch_bytes = 64 * 1024, .workers = 2, .prefetch = 4},
                           [](std::int64_t index, std::span<std::byte> out) {
                             std::memset(out.data(), static_cast<int>(index & 0xff), out.size());
                           });
  Loop loop{world, loader, metrics};

  // Calibrate the compute phase on rank 0 and share it, so every rank does the same work.
  {
    const auto start = Clock::now();
    loop.sink += compute(loop.data, 10);
    int repeats = std::max(1, static_cast<int>(step_ms / 1e3 / (seconds_since(start) / 10)));
    world.broadcast(&repeats, 1, tenax::DType::I32, 0);
    loop.repeats = repeats;
  }

  std::int64_t step = 0;
  for (int i = 0; i < steps; ++i)
    loop.step<false>(step++);  // warm-up
  std::vector<double> off, on, ratio;
  for (int round = 0; round < rounds; ++round) {
    double t_off = 0, t_on = 0;
    for (int half = 0; half < 2; ++half) {
      const bool measured = (half == 0) == (round % 2 == 1);  // alternate which mode goes first
      world.barrier();
      const auto start = Clock::now();
      if (measured) {
        for (int i = 0; i < steps; ++i)
          loop.step<true>(step++);
      } else {
        for (int i = 0; i < steps; ++i)
          loop.step<false>(step++);
      }
      world.barrier();
      (measured ? t_on : t_off) = seconds_since(start) / steps;
    }
    off.push_back(t_off);
    on.push_back(t_on);
    ratio.push_back(t_on / t_off);
  }

  // Each operation alone: a scope (two phase changes), and an empty step with its share of the window gathers.
  constexpr int kScopes = 200000;
  metrics.begin_step(step++);
  auto start = Clock::now();
  for (int i = 0; i < kScopes; ++i) {
    auto t = metrics.measure(Phase::Compute);
  }
  const double per_scope = seconds_since(start) / kScopes;
  metrics.end_step();
  const int empty_steps = every * 20;
  world.barrier();
  start = Clock::now();
  for (int i = 0; i < empty_steps; ++i) {
    metrics.begin_step(step++);
    metrics.end_step();
  }
  const double per_empty_step = seconds_since(start) / empty_steps;
  const tenax::metrics::Summary summary = metrics.finish();

  if (runtime.rank() == 0) {
    std::printf("# tenax-bench-metrics: %d ranks, %d rounds x %d steps per mode, compute ~%.1f ms/step, every %d\n",
                world.size(), rounds, steps, step_ms, every);
    std::printf("%-36s %15s %13s\n", "mode", "median step ms", "min step ms");
    std::printf("%-36s %15.3f %13.3f\n", "reference: loop without metrics", 1e3 * median(off),
                1e3 * *std::min_element(off.begin(), off.end()));
    std::printf("%-36s %15.3f %13.3f\n", "with StepMetrics, all outputs", 1e3 * median(on),
                1e3 * *std::min_element(on.begin(), on.end()));
    std::printf("%-36s %14.3f%%   median of per-round on/off ratios - 1 (target < 1%%)\n", "measured overhead",
                100 * (median(ratio) - 1));
    std::printf("%-36s %7.2f%% .. %.2f%%   quartiles of the per-round ratios - 1: the machine's noise\n", "  spread",
                100 * (quantile(ratio, 0.25) - 1), 100 * (quantile(ratio, 0.75) - 1));
    std::printf("\n%-36s %15s\n", "operation alone", "cost");
    std::printf("%-36s %12.1f ns\n", "measure() scope: 2 phase changes", 1e9 * per_scope);
    std::printf("%-36s %12.2f us\n", "empty step incl. 1/every of a gather", 1e6 * per_empty_step);
    std::printf("%-36s %14.4f%%   (5 scopes + 1 empty step) / reference step\n", "predicted overhead",
                100 * (5 * per_scope + per_empty_step) / median(off));
    std::printf("# StepMetrics measured %lld steps, mean %.3f ms\n", static_cast<long long>(summary.steps),
                1e3 * summary.mean_step_seconds);
  }
  world.barrier();
  if (runtime.rank() == 0) std::filesystem::remove_all(run_dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tenax::run_main(body, argc, argv);
}
