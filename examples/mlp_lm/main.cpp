// tenax-example-lm: trains the MLP language model (mlp_lm_model.hpp) on a synthetic Markov source with any combination
// of tensor, pipeline and data parallelism and any precision policy.
//
//   mpirun -np 4 tenax-example-lm --tp 2 --pp 2 --steps 50
//
//   mpirun -np 4 tenax-example-lm --device cuda --precision bf16 --dp 4      (one GPU per rank)
//
// Prints "step N loss X" once per step (world rank 0) and, at the end, a layout-independent checksum of the final
// parameters, so two runs can be compared exactly.
//
// Fault tolerance (training_run.hpp): with a checkpoint directory (--checkpoint-dir or TENAX_CHECKPOINT_DIR, which
// tenax-launch sets) it resumes from the newest complete checkpoint, in any layout, and saves every
// --checkpoint-every steps; under tenax-launch it heartbeats and stops with an emergency checkpoint on preemption.
#include <cxxopts.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "device_setup.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/runtime.hpp"
#include "trainer.hpp"
#include "training_run.hpp"

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
    ("device", "cpu, or cuda: one GPU per rank (node-local rank mod GPUs), NCCL groups",
     cxxopts::value<std::string>()->default_value("cpu"))
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
  o.add_options("fault tolerance")
    ("checkpoint-dir", "checkpoint directory: resume from its newest complete checkpoint, save there "
     "(default: TENAX_CHECKPOINT_DIR; none: no checkpoints)", cxxopts::value<std::string>())
    ("checkpoint-every", "save a checkpoint every N steps (0: only at the end and on preemption)",
     cxxopts::value<int>()->default_value("10"))
    ("keep", "complete checkpoints kept (default: TENAX_CKPT_KEEP)", cxxopts::value<int>())
    ("max-checkpoint-failures", "consecutive failed periodic checkpoints after which the run stops (a failed one "
     "is a warning; the next due step saves again)", cxxopts::value<int>()->default_value("3"))
    ("run-dir", "write the step metrics to <dir>/metrics/ (default: TENAX_RUN_DIR)", cxxopts::value<std::string>());
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
  c.device = tenax::examples::parse_device(args["device"].as<std::string>());
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

  tenax::examples::RunOptions run;
  run.steps = steps;
  run.checkpoint.dir = args.count("checkpoint-dir") ? args["checkpoint-dir"].as<std::string>()
                                                    : tenax::env::get_string("TENAX_CHECKPOINT_DIR");
  if (run.checkpoint.dir == "none") run.checkpoint.dir.clear();  // as --help says: no checkpoints, not a directory
  run.checkpoint.max_failures = args["max-checkpoint-failures"].as<int>();
  run.checkpoint.every = args["checkpoint-every"].as<int>();
  if (run.checkpoint.every < 0) throw tenax::UsageError("--checkpoint-every must be >= 0 (0: no periodic saves)");
  run.checkpoint.keep =
      args.count("keep") ? args["keep"].as<int>() : static_cast<int>(tenax::env::get_int("TENAX_CKPT_KEEP"));
  if (run.checkpoint.keep < 1) throw tenax::UsageError("--keep must be >= 1 (the newest checkpoint is always kept)");
  if (args.count("run-dir")) run.run_dir = args["run-dir"].as<std::string>();
  return tenax::examples::run_training(runtime, c, run);
}

}  // namespace

int main(int argc, char** argv) {
  return tenax::run_main(body, argc, argv);
}
