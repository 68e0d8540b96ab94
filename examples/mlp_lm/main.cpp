// tenax-example-lm: trains the MLP language model (mlp_lm_model.hpp) on a synthetic Markov source with any combination
// of tensor, pipeline and data parallelism and any precision policy.
//
//   mpirun -np 4 tenax-example-lm --tp 2 --pp 2 --steps 50
//
// Prints "step N loss X" once per step (world rank 0) and, at the end, a layout-independent checksum of the final
// parameters, so two runs can be compared exactly.
#include <cxxopts.hpp>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tenax/error.hpp"
#include "tenax/runtime.hpp"
#include "trainer.hpp"

namespace {

using tenax::examples::TrainConfig;

cxxopts::Options make_options() {
  cxxopts::Options o("tenax-example-lm", "Train an MLP language model with tensor, pipeline and data parallelism");
  // clang-format off
  o.add_options("layout")
    ("tp", "tensor-parallel size", cxxopts::value<int>()->default_value("1"))
    ("pp", "pipeline-parallel size (stages)", cxxopts::value<int>()->default_value("1"))
    ("dp", "data-parallel size (0: world size / (tp*pp))", cxxopts::value<int>()->default_value("0"))
    ("schedule", "pipeline schedule: 1f1b or gpipe", cxxopts::value<std::string>()->default_value("1f1b"));
  o.add_options("training")
    ("precision", "fp32, bf16 or fp16 (fp32 master weights in every mode)",
     cxxopts::value<std::string>()->default_value("fp32"))
    ("steps", "optimizer steps", cxxopts::value<int>()->default_value("50"))
    ("batch", "sequences per step, all data-parallel ranks together", cxxopts::value<int>()->default_value("16"))
    ("micro-batch", "sequences per micro-batch", cxxopts::value<int>()->default_value("4"))
    ("lr", "learning rate", cxxopts::value<float>()->default_value("0.003"))
    ("weight-decay", "decoupled weight decay", cxxopts::value<float>()->default_value("0"))
    ("optimizer", "adamw or sgd", cxxopts::value<std::string>()->default_value("adamw"))
    ("seed", "seed of the weights and of the data", cxxopts::value<std::uint64_t>()->default_value("1234"))
    ("bucket-mb", "gradient bucket size in MiB", cxxopts::value<double>()->default_value("32"))
    ("zero1", "shard the optimizer state over data-parallel ranks (ZeRO-1)")
    ("loss-scale-window", "fp16: clean steps before the loss scale grows", cxxopts::value<int>()->default_value("1000"))
    ("loss-scale-hysteresis", "fp16: overflows tolerated before the scale backs off",
     cxxopts::value<int>()->default_value("2"))
    ("inject-overflow-at", "fp16 testing: steps at which one rank's gradient is made infinite (comma list)",
     cxxopts::value<std::vector<long>>());
  o.add_options("model")
    ("vocab", "vocabulary size", cxxopts::value<std::size_t>()->default_value("256"))
    ("hidden", "hidden size (the MLP is 4x wider)", cxxopts::value<std::size_t>()->default_value("128"))
    ("layers", "residual MLP blocks", cxxopts::value<std::size_t>()->default_value("4"))
    ("seq-len", "tokens per sequence", cxxopts::value<std::size_t>()->default_value("32"));
  o.add_options()("h,help", "print this help");
  // clang-format on
  return o;
}

int body(int argc, char** argv) {
  tenax::Runtime runtime(argc, argv);
  cxxopts::Options options = make_options();
  cxxopts::ParseResult args;
  try {
    args = options.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw tenax::UsageError(std::string(e.what()) + " (see --help)");
  }
  if (args.count("help")) {
    if (runtime.rank() == 0) std::printf("%s\n", options.help().c_str());
    return tenax::kExitSuccess;
  }
  if (!args.unmatched().empty())
    throw tenax::UsageError("unexpected argument '" + args.unmatched()[0] + "' (see --help)");

  TrainConfig c;
  c.tp = args["tp"].as<int>();
  c.pp = args["pp"].as<int>();
  c.dp = args["dp"].as<int>();
  c.schedule = tenax::parse_pipeline_schedule(args["schedule"].as<std::string>());
  c.precision = tenax::PrecisionPolicy::parse(args["precision"].as<std::string>());
  c.batch = args["batch"].as<int>();
  c.micro_batch = args["micro-batch"].as<int>();
  c.seed = args["seed"].as<std::uint64_t>();
  c.model.vocab = args["vocab"].as<std::size_t>();
  c.model.hidden = args["hidden"].as<std::size_t>();
  c.model.layers = args["layers"].as<std::size_t>();
  c.model.seq_len = args["seq-len"].as<std::size_t>();
  const double bucket_mb = args["bucket-mb"].as<double>();
  if (!(bucket_mb > 0)) throw tenax::UsageError("--bucket-mb must be > 0");
  c.data_parallel.bucket_bytes = static_cast<std::size_t>(bucket_mb * 1024 * 1024);
  c.data_parallel.zero1 = args.count("zero1") > 0;
  c.optimizer.kind = tenax::OptimizerConfig::parse_kind(args["optimizer"].as<std::string>());
  c.optimizer.adamw.lr = c.optimizer.sgd.lr = args["lr"].as<float>();
  c.optimizer.adamw.weight_decay = c.optimizer.sgd.weight_decay = args["weight-decay"].as<float>();
  c.loss_scaler.growth_interval = args["loss-scale-window"].as<int>();
  c.loss_scaler.hysteresis = args["loss-scale-hysteresis"].as<int>();
  if (args.count("inject-overflow-at")) c.inject_overflow_at = args["inject-overflow-at"].as<std::vector<long>>();
  const int steps = args["steps"].as<int>();
  if (steps < 0) throw tenax::UsageError("--steps must be >= 0");

  tenax::examples::Trainer trainer(runtime.world(), c);
  const bool report = runtime.rank() == 0;
  if (report)
    std::printf("layout %s, precision %s, %d steps; loss of an untrained model ~%.3f, floor of the data ~%.3f\n",
                trainer.layout().to_string().c_str(), std::string(c.precision.name()).c_str(), steps,
                std::log(static_cast<double>(c.model.vocab)), trainer.loss_floor());
  for (int s = 0; s < steps; ++s) {
    const tenax::examples::StepResult r = trainer.step();
    if (!report) continue;
    if (r.skipped)
      std::printf("step %ld loss %.6f (skipped: gradient overflow at loss scale %g)\n", r.step, r.loss, r.loss_scale);
    else
      std::printf("step %ld loss %.6f\n", r.step, r.loss);
    std::fflush(stdout);
  }
  const std::uint64_t checksum = trainer.parameters_checksum();
  if (report) std::printf("final parameters checksum: %016" PRIx64 "\n", checksum);
  return tenax::kExitSuccess;
}

}  // namespace

int main(int argc, char** argv) {
  return tenax::run_main(body, argc, argv);
}
