// tenax-bench-training: training-step throughput of the example model (examples/mlp_lm) for every layout of the world,
// against the single-rank run of the same model and global batch measured in the same invocation.
//
//   mpirun -np 4 tenax-bench-training [--steps 20] [--precision fp32] [--hidden 128] ...
//
// Each row: warm-up steps, then `steps` timed steps between barriers (so the time is the slowest rank's). Tokens per
// second count the global batch. The reference row runs on world rank 0 alone while the other ranks wait.
#include <cxxopts.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tenax/error.hpp"
#include "tenax/runtime.hpp"
#include "trainer.hpp"

namespace {

using tenax::examples::TrainConfig;

struct Row {
  std::string name;
  double ms_per_step = 0;
  double tokens_per_s = 0;
  double last_loss = 0;
  std::size_t early_buckets = 0;
};

Row measure(tenax::Communicator& comm, TrainConfig c, int warmup, int steps, const std::string& name) {
  tenax::examples::Trainer trainer(comm, c);
  for (int s = 0; s < warmup; ++s)
    trainer.step();
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  tenax::examples::StepResult last;
  for (int s = 0; s < steps; ++s)
    last = trainer.step();
  comm.barrier();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Row r;
  r.name = name;
  r.ms_per_step = 1e3 * seconds / steps;
  r.tokens_per_s = static_cast<double>(c.batch) * static_cast<double>(c.model.seq_len) * steps / seconds;
  r.last_loss = last.loss;
  r.early_buckets = last.buckets_reduced_early;
  return r;
}

int body(int argc, char** argv) {
  tenax::Runtime runtime(argc, argv);
  cxxopts::Options o("tenax-bench-training", "Training step throughput of the example model per parallel layout");
  // clang-format off
  o.add_options()
    ("steps", "timed steps per layout", cxxopts::value<int>()->default_value("20"))
    ("warmup", "untimed steps per layout", cxxopts::value<int>()->default_value("3"))
    ("precision", "fp32, bf16 or fp16", cxxopts::value<std::string>()->default_value("fp32"))
    ("batch", "sequences per step", cxxopts::value<int>()->default_value("16"))
    ("micro-batch", "sequences per micro-batch", cxxopts::value<int>()->default_value("2"))
    ("vocab", "vocabulary", cxxopts::value<std::size_t>()->default_value("256"))
    ("hidden", "hidden size", cxxopts::value<std::size_t>()->default_value("128"))
    ("layers", "blocks", cxxopts::value<std::size_t>()->default_value("4"))
    ("seq-len", "tokens per sequence", cxxopts::value<std::size_t>()->default_value("32"))
    ("bucket-mb", "gradient bucket size in MiB", cxxopts::value<double>()->default_value("32"))
    ("h,help", "print this help");
  // clang-format on
  cxxopts::ParseResult args;
  try {
    args = o.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw tenax::UsageError(std::string(e.what()) + " (see --help)");
  }
  if (args.count("help")) {
    if (runtime.rank() == 0) std::printf("%s\n", o.help().c_str());
    return tenax::kExitSuccess;
  }
  TrainConfig base;
  base.precision = tenax::PrecisionPolicy::parse(args["precision"].as<std::string>());
  base.batch = args["batch"].as<int>();
  base.micro_batch = args["micro-batch"].as<int>();
  base.model.vocab = args["vocab"].as<std::size_t>();
  base.model.hidden = args["hidden"].as<std::size_t>();
  base.model.layers = args["layers"].as<std::size_t>();
  base.model.seq_len = args["seq-len"].as<std::size_t>();
  base.data_parallel.bucket_bytes = static_cast<std::size_t>(args["bucket-mb"].as<double>() * 1024 * 1024);
  const int steps = args["steps"].as<int>(), warmup = args["warmup"].as<int>();
  if (steps < 1 || warmup < 0) throw tenax::UsageError("--steps must be >= 1 and --warmup >= 0");

  tenax::Communicator& world = runtime.world();
  const int n = world.size();
  std::vector<Row> rows;

  // The reference: one rank, same model and global batch.
  {
    std::unique_ptr<tenax::Communicator> self = world.split(world.rank() == 0 ? 0 : -1, 0, "reference");
    TrainConfig c = base;
    c.tp = c.pp = c.dp = 1;
    if (self) rows.push_back(measure(*self, c, warmup, steps, "1 rank (reference)"));
    world.barrier();
  }
  // Every (tp, pp) whose product divides the world and that the model can be split by; dp fills the rest.
  for (int tp = 1; tp <= n; ++tp) {
    for (int pp = 1; pp <= n; ++pp) {
      if (n % (tp * pp) != 0) continue;
      for (bool zero1 : {false, true}) {
        const int dp = n / (tp * pp);
        if (zero1 && dp == 1) continue;
        TrainConfig c = base;
        c.tp = tp;
        c.pp = pp;
        c.dp = dp;
        c.data_parallel.zero1 = zero1;
        try {
          c.validate(n);
        } catch (const tenax::UsageError&) {
          continue;  // e.g. more stages than layers, or a batch that does not split: not a layout of this model
        }
        const std::string name = "tp=" + std::to_string(tp) + ",pp=" + std::to_string(pp) +
                                 ",dp=" + std::to_string(dp) + (zero1 ? " zero1" : "");
        rows.push_back(measure(world, c, warmup, steps, name));
      }
    }
  }
  if (world.rank() == 0) {
    std::printf("# %d ranks, precision %s, model vocab %zu hidden %zu layers %zu seq %zu, batch %d, micro-batch %d\n",
                n, std::string(base.precision.name()).c_str(), base.model.vocab, base.model.hidden, base.model.layers,
                base.model.seq_len, base.batch, base.micro_batch);
    std::printf("%-24s %12s %14s %10s %12s %14s\n", "layout", "ms/step", "tokens/s", "vs 1 rank", "last loss",
                "early buckets");
    const double ref = rows.front().tokens_per_s;
    for (const Row& r : rows)
      std::printf("%-24s %12.2f %14.0f %9.2fx %12.5f %14zu\n", r.name.c_str(), r.ms_per_step, r.tokens_per_s,
                  r.tokens_per_s / ref, r.last_loss, r.early_buckets);
  }
  return tenax::kExitSuccess;
}

}  // namespace

int main(int argc, char** argv) {
  return tenax::run_main(body, argc, argv);
}
