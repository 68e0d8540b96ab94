// tenax-bench-data: what the token data pipeline sustains against what a model consumes. For 1, 2 and 4 loader
// threads it measures, on a dataset written by tenax-data:
//   - the loader alone: batches pulled as fast as the consumer can take them (tokens/s the loader sustains);
//   - a consumer that spends --step-ms per batch (the model's step time): the starvation share, the time next()
//     blocked over the whole time, which the engine reports as data wait.
//
//   tenax-bench-data DATASET_DIR [--seq-len 128] [--batch 16] [--dp 1] [--batches 2000] [--step-ms 300]
//                    [--consumer-batches 40] [--workers 1,2,4]
//
// The reference is the model: tokens per second it consumes at --step-ms (batch x seq_len / step time).
#include <cxxopts.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tenax/data_loader.hpp"
#include "tenax/error.hpp"
#include "tenax/token_dataset.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Busy work standing in for the model's step (a sleeping consumer would leave the core to the loader threads, which
// a training step does not).
void compute_for(double seconds) {
  const Clock::time_point t0 = Clock::now();
  volatile double x = 1.0;
  while (seconds_since(t0) < seconds)
    for (int i = 0; i < 1000; ++i)
      x = x * 1.0000001 + 1e-9;
}

struct Result {
  double loader_tokens_per_s = 0;
  double starvation = 0;
  double max_wait_ms = 0;
};

Result measure(const std::shared_ptr<const tenax::TokenDataset>& dataset, std::uint64_t batch, int dp, int workers,
               long batches, double step_s, long consumer_batches) {
  const std::size_t bytes = tenax::token_batch_bytes(*dataset, batch, dp);
  const double tokens_per_batch = static_cast<double>(bytes / sizeof(std::int32_t));
  Result r;
  {
    tenax::DataLoader loader({.batch_bytes = bytes, .workers = workers, .prefetch = 4},
                             tenax::make_token_batch_producer(dataset, batch, 0, dp));
    (void)loader.next();  // threads started, first batch ready
    const Clock::time_point t0 = Clock::now();
    for (long i = 0; i < batches; ++i)
      (void)loader.next();
    r.loader_tokens_per_s = tokens_per_batch * static_cast<double>(batches) / seconds_since(t0);
  }
  {
    // Started at another index: a cold start, as after a resume.
    tenax::DataLoader loader({.batch_bytes = bytes, .workers = workers, .prefetch = 4, .first_index = 100000},
                             tenax::make_token_batch_producer(dataset, batch, 0, dp));
    const Clock::time_point t0 = Clock::now();
    for (long i = 0; i < consumer_batches; ++i) {
      (void)loader.next();
      compute_for(step_s);
    }
    const double total = seconds_since(t0);
    r.starvation = loader.stats().wait_seconds / total;
    r.max_wait_ms = loader.stats().max_wait_seconds * 1e3;
  }
  return r;
}

int run(int argc, char** argv) {
  cxxopts::Options o("tenax-bench-data", "Token data pipeline throughput and starvation against a model's step");
  // clang-format off
  o.add_options()
    ("dataset", "dataset directory", cxxopts::value<std::string>())
    ("seq-len", "tokens per sample", cxxopts::value<std::uint32_t>()->default_value("128"))
    ("batch", "global batch (sequences)", cxxopts::value<std::uint64_t>()->default_value("16"))
    ("dp", "data-parallel ranks (this process reads rank 0's share)", cxxopts::value<int>()->default_value("1"))
    ("batches", "batches pulled by the loader-alone measurement", cxxopts::value<long>()->default_value("2000"))
    ("step-ms", "the consumer's time per batch (the model's step time)", cxxopts::value<double>()->default_value("300"))
    ("consumer-batches", "batches the consumer takes", cxxopts::value<long>()->default_value("40"))
    ("workers", "comma list of loader thread counts", cxxopts::value<std::string>()->default_value("1,2,4"))
    ("h,help", "print this help");
  // clang-format on
  o.parse_positional({"dataset"});
  cxxopts::ParseResult a;
  try {
    a = o.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw tenax::UsageError(std::string(e.what()) + " (see --help)");
  }
  if (a.count("help") || !a.count("dataset")) {
    std::printf("%s\n", o.help().c_str());
    return a.count("help") ? 0 : 64;
  }
  const double step_s = a["step-ms"].as<double>() / 1e3;
  const long batches = a["batches"].as<long>(), consumer_batches = a["consumer-batches"].as<long>();
  if (!(step_s >= 0) || batches < 1 || consumer_batches < 1)
    throw tenax::UsageError("--step-ms must be >= 0, --batches and --consumer-batches >= 1");
  const std::uint32_t seq_len = a["seq-len"].as<std::uint32_t>();
  const std::uint64_t batch = a["batch"].as<std::uint64_t>();
  const int dp = a["dp"].as<int>();
  auto dataset = std::make_shared<const tenax::TokenDataset>(
      a["dataset"].as<std::string>(), tenax::TokenDatasetOptions{.split = tenax::Split::Train, .seq_len = seq_len});
  const double consumed = static_cast<double>(batch / static_cast<std::uint64_t>(dp)) * (seq_len + 1) / step_s;
  std::printf("# dataset %s: %llu tokens in %zu shard(s), %u-byte tokens; batch %llu x %u tokens on dp rank 0 of %d\n",
              dataset->info().dir.c_str(), static_cast<unsigned long long>(dataset->info().tokens),
              dataset->info().shards, dataset->info().token_bytes, static_cast<unsigned long long>(batch), seq_len + 1,
              dp);
  std::printf("# the model consumes %.0f tokens/s at %.0f ms per step (the reference)\n", consumed, step_s * 1e3);
  std::printf("%8s %18s %16s %12s %14s\n", "workers", "loader tokens/s", "vs consumption", "starvation", "longest wait");
  std::stringstream list(a["workers"].as<std::string>());
  for (std::string item; std::getline(list, item, ',');) {
    const int workers = std::stoi(item);
    const Result r = measure(dataset, batch, dp, workers, batches, step_s, consumer_batches);
    std::printf("%8d %18.0f %15.0fx %11.3f%% %11.3f ms\n", workers, r.loader_tokens_per_s,
                r.loader_tokens_per_s / consumed, 100 * r.starvation, r.max_wait_ms);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const tenax::UsageError& e) {
    std::fprintf(stderr, "tenax-bench-data: %s\n", e.what());
    return 64;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tenax-bench-data: %s\n", e.what());
    return 1;
  }
}
