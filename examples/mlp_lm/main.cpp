// tenax-example-lm: a complete fault-tolerant training program on tenax's engine. It trains a language model of
// residual MLP blocks (tenax/models.hpp) on a synthetic Markov source with any mix of tensor, pipeline (GPipe, 1F1B,
// interleaved) and data parallelism, in fp32, bf16 or fp16, on CPUs or GPUs, with asynchronous checkpoints resumed in
// any layout, preemption and step metrics: everything but the options below is the engine's.
//
//   mpirun -np 4 tenax-example-lm --tp 2 --pp 2 --steps 50
//   tenax-launch -n 4 --checkpoint-dir ckpt -- tenax-example-lm --steps 1000 --checkpoint-every 50
//
// Prints "step N loss X" (world rank 0) and at the end a layout-independent checksum of the parameters, so two runs can
// be compared exactly.
#include <cxxopts.hpp>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>

#include "command_line.hpp"
#include "tenax/engine.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/models.hpp"
#include "tenax/runtime.hpp"
#include "tenax/synthetic_data.hpp"

namespace {

cxxopts::Options make_options() {
  cxxopts::Options o("tenax-example-lm", "Train an MLP language model with tensor, pipeline and data parallelism");
  // clang-format off
  o.add_options("layout (default: TENAX_LAYOUT, else data parallelism over every rank)")
    ("tp", "tensor-parallel size", cxxopts::value<int>())
    ("pp", "pipeline-parallel size (stages)", cxxopts::value<int>())
    ("dp", "data-parallel size (default: world size / (tp*pp))", cxxopts::value<int>())
    ("schedule", "pipeline schedule: 1f1b, gpipe or interleaved", cxxopts::value<std::string>()->default_value("1f1b"))
    ("virtual-stages", "model chunks per pipeline stage (interleaved)", cxxopts::value<int>()->default_value("1"));
  o.add_options("training")
    ("precision", "fp32, bf16 or fp16 (fp32 master weights in every mode)", cxxopts::value<std::string>()->default_value("fp32"))
    ("device", "cpu, or cuda: one GPU per rank, NCCL groups", cxxopts::value<std::string>()->default_value("cpu"))
    ("steps", "optimizer steps", cxxopts::value<long>()->default_value("50"))
    ("batch", "sequences per step, all data-parallel ranks together", cxxopts::value<int>()->default_value("16"))
    ("micro-batch", "sequences per micro-batch", cxxopts::value<int>()->default_value("4"))
    ("lr", "learning rate", cxxopts::value<float>()->default_value("0.003"))
    ("weight-decay", "decoupled weight decay", cxxopts::value<float>()->default_value("0"))
    ("optimizer", "adamw or sgd", cxxopts::value<std::string>()->default_value("adamw"))
    ("seed", "seed of the weights and of the data", cxxopts::value<std::uint64_t>()->default_value("1234"))
    ("bucket-mb", "gradient bucket size in MiB", cxxopts::value<double>()->default_value("32"))
    ("zero1", "shard the optimizer state over data-parallel ranks (ZeRO-1)");
  o.add_options("fault tolerance")
    ("checkpoint-dir", "checkpoint directory (default: TENAX_CHECKPOINT_DIR; none: no checkpoints)", cxxopts::value<std::string>())
    ("checkpoint-every", "save every N steps (0: only at the end and on preemption), or auto: the Young/Daly interval from the measured save cost and the MTBF (TENAX_MTBF, or this run's own under tenax-launch)", cxxopts::value<std::string>()->default_value(tenax::CheckpointPolicy::every_default("10")))
    ("keep", "complete checkpoints kept (default: TENAX_CKPT_KEEP)", cxxopts::value<int>())
    ("max-checkpoint-failures", "failed periodic checkpoints in a row after which the run stops (each one is a "
     "warning; the next due step saves again)", cxxopts::value<int>()->default_value("3"))
    ("run-dir", "write step metrics to <dir>/metrics/ (default: TENAX_RUN_DIR)", cxxopts::value<std::string>());
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
  const cxxopts::ParseResult a = tenax::examples::parse_command_line(options, argc, argv);
  if (a.count("help")) {
    if (runtime.rank() == 0) std::printf("%s\n", options.help().c_str());
    return tenax::kExitSuccess;
  }

  tenax::EngineConfig c;
  if (a.count("tp") || a.count("pp") || a.count("dp")) {
    const int tp = a.count("tp") ? a["tp"].as<int>() : 1, pp = a.count("pp") ? a["pp"].as<int>() : 1;
    if (tp < 1 || pp < 1) throw tenax::UsageError("layout: --tp and --pp must be >= 1");
    c.layout = a.count("dp") ? tenax::ParallelLayout{tp, pp, a["dp"].as<int>()}
                             : tenax::ParallelLayout::infer(runtime.size(), tp, pp);
  }
  c.schedule = tenax::parse_pipeline_kind(a["schedule"].as<std::string>());
  c.virtual_stages = a["virtual-stages"].as<int>();
  c.precision = tenax::PrecisionPolicy::parse(a["precision"].as<std::string>());
  c.device = tenax::parse_device(a["device"].as<std::string>());
  c.steps = a["steps"].as<long>();
  c.global_batch = a["batch"].as<int>();
  c.micro_batch = a["micro-batch"].as<int>();
  c.seq_len = a["seq-len"].as<std::size_t>();
  c.seed = a["seed"].as<std::uint64_t>();
  c.optimizer.kind = tenax::OptimizerConfig::parse_kind(a["optimizer"].as<std::string>());
  c.lr.lr = a["lr"].as<float>();
  c.optimizer.adamw.weight_decay = c.optimizer.sgd.weight_decay = a["weight-decay"].as<float>();
  const double bucket_mb = a["bucket-mb"].as<double>();
  if (!(bucket_mb > 0 && bucket_mb < 1e6)) throw tenax::UsageError("--bucket-mb must be in (0, 1e6)");
  c.data_parallel.bucket_bytes = static_cast<std::size_t>(bucket_mb * 1024 * 1024);
  c.data_parallel.zero1 = a.count("zero1") > 0;
  if (a.count("checkpoint-dir")) c.checkpoint.dir = a["checkpoint-dir"].as<std::string>();
  c.checkpoint = tenax::CheckpointPolicy::parse_every(a["checkpoint-every"].as<std::string>(), c.checkpoint);
  if (a.count("keep")) c.checkpoint.keep = a["keep"].as<int>();
  c.checkpoint.max_failures = a["max-checkpoint-failures"].as<int>();
  if (a.count("run-dir")) c.run_dir = a["run-dir"].as<std::string>();

  tenax::models::MlpLmConfig model;
  model.vocab = a["vocab"].as<std::size_t>();
  model.hidden = a["hidden"].as<std::size_t>();
  model.layers = a["layers"].as<std::size_t>();
  auto data = std::make_shared<tenax::MarkovSource>(model.vocab, 4, c.seed);

  tenax::Engine engine(runtime.world(), c, tenax::models::mlp_lm(model), data);
  if (engine.rank() == 0)
    std::printf("layout %s, precision %s, %ld steps; loss of an untrained model ~%.3f, floor of the data ~%.3f\n",
                engine.layout().to_string().c_str(), std::string(c.precision.name()).c_str(), c.steps,
                std::log(static_cast<double>(model.vocab)), data->entropy_rate());
  const int code = engine.run([&](const tenax::StepResult& r) {
    if (engine.rank() != 0) return;
    if (r.skipped)
      std::printf("step %ld loss %.6f (skipped: gradient overflow at loss scale %g)\n", r.step, r.loss, r.loss_scale);
    else
      std::printf("step %ld loss %.6f\n", r.step, r.loss);
    std::fflush(stdout);
  });
  if (code != tenax::kExitSuccess) return code;
  const std::uint64_t checksum = engine.parameters_checksum();
  if (engine.rank() == 0) std::printf("final parameters checksum: %016" PRIx64 "\n", checksum);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  return tenax::run_main(body, argc, argv);
}
