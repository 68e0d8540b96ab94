// A small training-shaped program that fills a run directory with metrics, for the report command's test:
//   make_run_dir FIRST_STEP LAST_STEP   (under mpirun; TENAX_RUN_DIR names the directory)
// Every step waits for a batch from a DataLoader, computes, all-reduces and steps the optimizer; every 10th batch is
// slow to produce (a starvation spike) and every 25th step takes a checkpoint stall, so the picture has texture. Each
// step also logs its progress (a loss falling as 5 / sqrt(step + 1), 512 tokens) and every 20th a validation loss.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "tenax/data_loader.hpp"
#include "tenax/error.hpp"
#include "tenax/metrics.hpp"
#include "tenax/runtime.hpp"

namespace {

using tenax::metrics::Phase;

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

int body(int argc, char** argv) {
  tenax::Runtime runtime(argc, argv);
  if (argc != 3) throw tenax::UsageError("usage: make_run_dir FIRST_STEP LAST_STEP");
  const std::int64_t first = std::stoll(argv[1]);
  const std::int64_t last = std::stoll(argv[2]);

  tenax::metrics::StepMetrics metrics(runtime.world());
  tenax::DataLoader loader({.batch_bytes = 4096, .workers = 1, .prefetch = 2, .first_index = first},
                           [](std::int64_t index, std::span<std::byte> out) {
                             std::memset(out.data(), static_cast<int>(index & 0xff), out.size());
                             sleep_ms(index % 10 == 0 ? 12 : 1);
                           });
  for (std::int64_t step = first; step <= last; ++step) {
    metrics.begin_step(step);
    tenax::Batch batch;
    {
      auto t = metrics.measure(Phase::DataWait);
      batch = loader.next();
    }
    {
      auto t = metrics.measure(Phase::Compute);
      sleep_ms(4);
    }
    {
      auto t = metrics.measure(Phase::Comm);
      float x = static_cast<float>(batch.host[0]), sum = 0;
      runtime.world().all_reduce(&x, &sum, 1, tenax::DType::F32, tenax::ReduceOp::Sum);
    }
    {
      auto t = metrics.measure(Phase::Optimizer);
      sleep_ms(1);
    }
    if (step % 25 == 24) {
      auto t = metrics.measure(Phase::Checkpoint);
      sleep_ms(8);
    }
    metrics.end_step();
    tenax::metrics::Progress progress{.step = step,
                                      .loss = 5.0 / std::sqrt(static_cast<double>(step + 1)),
                                      .tokens = 512,
                                      .step_seconds = 0.008,
                                      .learning_rate = 1e-3};
    if (step % 20 == 19) progress.validation_loss = progress.loss * 1.1;
    metrics.log_progress(progress);
  }
  const tenax::metrics::Summary summary = metrics.finish();
  if (runtime.rank() == 0) std::fputs(summary.table.c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tenax::run_main(body, argc, argv);
}
