// tenax-bench-training: training-step throughput of the engine on one of the library's language models (--model mlp:
// tenax::models::mlp_lm, --model gpt: tenax::models::gpt) for every layout of the world, against the single-rank run
// of the same model and global batch measured in the same invocation (--layouts reference: that row only, e.g. beside
// another framework on the same machine, bench/torch).
//
//   mpirun -np 4 tenax-bench-training [--steps 20] [--precision fp32] [--hidden 128] ...
//   mpirun -np 4 tenax-bench-training --model gpt --heads 4 --hidden 128 --seq-len 64 --vocab 2048
//   mpirun -np 8 tenax-bench-training --device cuda --precision bf16 --hidden 2048 --layers 8 --vocab 32768
//       --seq-len 512 --batch 64 --micro-batch 8          (one command line)
//
// Each row: warm-up steps, then `steps` timed steps between barriers (so the time is the slowest rank's). Tokens per
// second count the global batch. The reference row runs on world rank 0 alone while the other ranks wait.
//
// With --device cuda every row also reports the model FLOP utilisation: the model's matrix-product FLOPs per step
// (6 per weight per token: forward, and the input and weight gradients) per second, against the bf16 matmul rate
// (bf16 inputs, fp32 accumulation, the rate the GPU path's products run at) measured on rank 0's GPU in the same run at
// a size that fills it, times the number of GPUs the row uses. Target: >= 40%.
//
// --op-profile: the reference row again with the op profile (TENAX_PROFILE_OPS, docs/metrics.md) over its timed
// steps; the two rows' times show what profiling costs, and rank 0 prints the profile on stderr.
//
// --phases (one rank's model, the reference row's): the engine's step-phase metrics against a ground truth that uses
// neither them nor a profiler. run() trains --warmup + --steps steps with its metrics on (with --device cuda the
// phases are CUDA events on the engine's stream); the ground truth is the host clock between the ends of consecutive
// steps in run()'s callback. Each step reads its loss back from the device before it returns, so the interval between
// step ends is the device's time per step, whatever the step left in flight. Printed: both per step over the timed
// steps, their ratio, each phase's share, and whether the phases add up to the step.
#include <cxxopts.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/machine_line.hpp"
#include "core/json.hpp"
#include "engine/device_setup.hpp"
#include "tenax/engine.hpp"
#include "tenax/error.hpp"
#include "tenax/execution.hpp"
#include "tenax/kernels/blas_core.hpp"
#include "tenax/models.hpp"
#include "tenax/ops.hpp"
#include "tenax/runtime.hpp"
#include "tenax/synthetic_data.hpp"

namespace {

struct TrainConfig {
  tenax::EngineConfig engine;
  bool gpt = false;  // else the MLP model
  tenax::models::MlpLmConfig mlp;
  tenax::models::GptConfig transformer;
  std::size_t vocab() const { return gpt ? transformer.vocab : mlp.vocab; }
  std::size_t hidden() const { return gpt ? transformer.hidden : mlp.hidden; }
  std::size_t layers() const { return gpt ? transformer.layers : mlp.layers; }
  tenax::ChunkBuilder builder() const { return gpt ? tenax::models::gpt(transformer) : tenax::models::mlp_lm(mlp); }
};

struct Row {
  std::string name;
  int ranks = 1;
  double ms_per_step = 0;
  double tokens_per_s = 0;
  double last_loss = 0;
  std::size_t early_buckets = 0;
};

// Matrix-product FLOPs of one training step: 2 FLOPs per weight and token forward, 4 backward, over the matrices of
// the blocks (MLP: fc1 h x 4h and fc2 4h x h; GPT adds qkv h x 3h and the projection h x h) and the output projection
// (h x vocab); GPT adds the attention products QK^T and PV, 12 x layers x hidden x seq_len per token forward and
// backward (the usual convention, which does not halve them for the causal mask). Layer norms, GeLU, softmax and the
// loss are not counted (they are memory-bound, as usual in model FLOP utilisation).
double model_flops_per_step(const TrainConfig& c) {
  const double h = static_cast<double>(c.hidden()), layers = static_cast<double>(c.layers());
  const double seq = static_cast<double>(c.engine.seq_len);
  const double block_weights = (c.gpt ? 12.0 : 8.0) * h * h;
  const double per_token =
      6.0 * (block_weights * layers + h * static_cast<double>(c.vocab())) + (c.gpt ? 12.0 * layers * h * seq : 0.0);
  return per_token * static_cast<double>(c.engine.global_batch) * seq;
}

// The bf16 matmul rate of GPU `device` (FLOP/s): square products of `size`, bf16 inputs with fp32 accumulation into
// fp32, through the same call the training path uses (ops::gemm_mixed with 16-bit operands). Median of `reps` runs.
double bf16_matmul_rate(int device, std::size_t size, int reps) {
  std::unique_ptr<tenax::ExecutionContext> ctx = tenax::ExecutionContext::cuda(device);
  const auto n = static_cast<std::int64_t>(size * size);
  // Values that are not all zero (tensor cores draw less power, and may run faster, on zeros).
  std::vector<float> pattern(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < pattern.size(); ++i)
    pattern[i] = 1e-2f * static_cast<float>(static_cast<int>(i % 17) - 8);
  std::vector<std::uint16_t> bits(pattern.size());
  tenax::ops::cast_from_f32(tenax::ExecutionContext::host(), pattern.data(), bits.data(), tenax::DType::BF16,
                            bits.size());
  tenax::Tensor a = ctx->empty({n}, tenax::DType::BF16), b = ctx->empty({n}, tenax::DType::BF16);
  tenax::Tensor c = ctx->zeros({n}, tenax::DType::F32);
  ctx->upload(a.data(), bits.data(), a.nbytes());
  ctx->upload(b.data(), bits.data(), b.nbytes());
  auto product = [&] {
    tenax::ops::gemm_mixed(*ctx, tenax::DType::BF16, tenax::kernels::Trans::No, tenax::kernels::Trans::No, size, size,
                           size, 1.0f, nullptr, a.data(), size, nullptr, b.data(), size, 0.0f, c.as<float>(), size);
  };
  product();  // warm-up: cuBLAS picks and loads its kernel
  ctx->synchronize();
  std::vector<double> seconds;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    product();
    ctx->synchronize();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return 2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size) /
         seconds[seconds.size() / 2];
}

Row measure(tenax::Communicator& comm, const TrainConfig& c, int warmup, int steps, const std::string& name) {
  auto data = std::make_shared<tenax::MarkovSource>(c.vocab(), 4, c.engine.seed);
  tenax::Engine trainer(comm, c.engine, c.builder(), data);
  for (int s = 0; s < warmup; ++s)
    trainer.step();
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  tenax::StepResult last;
  for (int s = 0; s < steps; ++s)
    last = trainer.step();
  comm.barrier();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Row r;
  r.name = name;
  r.ranks = comm.size();
  r.ms_per_step = 1e3 * seconds / steps;
  r.tokens_per_s = static_cast<double>(c.engine.global_batch) * static_cast<double>(c.engine.seq_len) * steps / seconds;
  r.last_loss = last.loss;
  r.early_buckets = last.buckets_reduced_early;
  return r;
}

// --phases: see the header. Collective over `comm` (one rank: the reference model).
void compare_phases(tenax::Communicator& comm, const TrainConfig& base, int warmup, int steps) {
  TrainConfig c = base;
  c.engine.layout = tenax::ParallelLayout{1, 1, 1};
  c.engine.steps = warmup + steps;
  char dir_template[] = "/tmp/tenax-bench-phases-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) throw tenax::IoError("bench: cannot create a directory under /tmp");
  const std::filesystem::path dir = dir_template;
  c.engine.run_dir = dir.string();
  std::vector<std::chrono::steady_clock::time_point> ends;
  {
    auto data = std::make_shared<tenax::MarkovSource>(c.vocab(), 4, c.engine.seed);
    tenax::Engine trainer(comm, c.engine, c.builder(), data);
    trainer.run([&](const tenax::StepResult&) { ends.push_back(std::chrono::steady_clock::now()); });
  }
  std::string timer;
  std::vector<double> step_s;
  std::vector<std::vector<std::pair<std::string, double>>> phases;
  std::ifstream lines(dir / "metrics" / "steps.jsonl");
  for (std::string line; std::getline(lines, line);) {
    const tenax::json::Value v = tenax::json::Value::parse(line);
    const std::string event = v.at("event").string();
    if (event == "start") timer = v.string_or("timer", "?");
    if (event != "step") continue;
    step_s.push_back(v.at("step_s").at("mean").number());
    phases.emplace_back();
    for (const tenax::json::Value& p : v.at("phases_s").members())
      phases.back().emplace_back(p.key(), p.at("mean").number());
  }
  std::filesystem::remove_all(dir);
  if (ends.size() != static_cast<std::size_t>(warmup + steps) || step_s.size() != ends.size()) {
    std::printf("# phases: %zu step ends and %zu step records for %d steps: not compared\n", ends.size(), step_s.size(),
                warmup + steps);
    return;
  }
  const double truth = std::chrono::duration<double>(ends.back() - ends[warmup - 1]).count() / steps;
  double measured = 0, phase_sum = 0;
  std::vector<std::pair<std::string, double>> share = phases[warmup];
  for (auto& [name, seconds] : share)
    seconds = 0;
  for (std::size_t i = warmup; i < step_s.size(); ++i) {
    measured += step_s[i] / steps;
    for (std::size_t p = 0; p < share.size() && p < phases[i].size(); ++p) {
      share[p].second += phases[i][p].second / steps;
      phase_sum += phases[i][p].second / steps;
    }
  }
  std::printf(
      "# phases (%s timer) over steps %d-%d: metrics %.3f ms/step, host clock between step ends %.3f ms/step "
      "(ratio %.3f); phases add up to %.3f ms/step:",
      timer.c_str(), warmup + 1, warmup + steps, 1e3 * measured, 1e3 * truth, measured / truth, 1e3 * phase_sum);
  for (const auto& [name, seconds] : share)
    std::printf(" %s %.1f%%", name.c_str(), 100.0 * seconds / measured);
  std::printf("\n");
}

int body(int argc, char** argv) {
  tenax::Runtime runtime(argc, argv);
  cxxopts::Options o("tenax-bench-training", "Training step throughput of the example model per parallel layout");
  // clang-format off
  o.add_options()
    ("model", "mlp or gpt", cxxopts::value<std::string>()->default_value("mlp"))
    ("layouts", "all (every layout of the world, and the 1-rank reference) or reference (that row only)",
     cxxopts::value<std::string>()->default_value("all"))
    ("steps", "timed steps per layout", cxxopts::value<int>()->default_value("20"))
    ("warmup", "untimed steps per layout", cxxopts::value<int>()->default_value("3"))
    ("precision", "fp32, bf16 or fp16", cxxopts::value<std::string>()->default_value("fp32"))
    ("batch", "sequences per step", cxxopts::value<int>()->default_value("16"))
    ("micro-batch", "sequences per micro-batch", cxxopts::value<int>()->default_value("2"))
    ("vocab", "vocabulary", cxxopts::value<std::size_t>()->default_value("256"))
    ("hidden", "hidden size", cxxopts::value<std::size_t>()->default_value("128"))
    ("layers", "blocks", cxxopts::value<std::size_t>()->default_value("4"))
    ("heads", "gpt: attention heads", cxxopts::value<std::size_t>()->default_value("4"))
    ("lr", "learning rate (AdamW)", cxxopts::value<float>()->default_value("0.003"))
    ("seq-len", "tokens per sequence", cxxopts::value<std::size_t>()->default_value("32"))
    ("bucket-mb", "gradient bucket size in MiB", cxxopts::value<double>()->default_value("32"))
    ("device", "cpu, or cuda (one GPU per rank; adds model FLOP utilisation)",
     cxxopts::value<std::string>()->default_value("cpu"))
    ("matmul-size", "cuda: m=n=k of the bf16 reference matmul", cxxopts::value<std::size_t>()->default_value("8192"))
    ("phases", "also compare the engine's step-phase metrics with the host clock between step ends (one rank)")
    ("op-profile", "also run the reference with TENAX_PROFILE_OPS over its timed steps: its row shows what the "
     "profile costs, and rank 0 prints the op profile on stderr")
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
  base.engine.precision = tenax::PrecisionPolicy::parse(args["precision"].as<std::string>());
  base.engine.global_batch = args["batch"].as<int>();
  base.engine.micro_batch = args["micro-batch"].as<int>();
  base.engine.seq_len = args["seq-len"].as<std::size_t>();
  base.engine.checkpoint.dir = "none";
  const std::string model = args["model"].as<std::string>(), layouts = args["layouts"].as<std::string>();
  if (model != "mlp" && model != "gpt") throw tenax::UsageError("--model must be mlp or gpt, not '" + model + "'");
  if (layouts != "all" && layouts != "reference")
    throw tenax::UsageError("--layouts must be all or reference, not '" + layouts + "'");
  base.gpt = model == "gpt";
  base.mlp.vocab = base.transformer.vocab = args["vocab"].as<std::size_t>();
  base.mlp.hidden = base.transformer.hidden = args["hidden"].as<std::size_t>();
  base.mlp.layers = base.transformer.layers = args["layers"].as<std::size_t>();
  base.transformer.heads = args["heads"].as<std::size_t>();
  base.transformer.max_positions = std::max<std::size_t>(base.engine.seq_len, 1);
  base.engine.lr.lr = args["lr"].as<float>();
  base.engine.data_parallel.bucket_bytes = static_cast<std::size_t>(args["bucket-mb"].as<double>() * 1024 * 1024);
  base.engine.device = tenax::parse_device(args["device"].as<std::string>());
  const bool on_gpu = base.engine.device == tenax::Device::Cuda;
  const int steps = args["steps"].as<int>(), warmup = args["warmup"].as<int>();
  if (steps < 1 || warmup < 0) throw tenax::UsageError("--steps must be >= 1 and --warmup >= 0");
  // --phases times the first timed step from the end of a warm-up step.
  if (args.count("phases") && warmup < 1) throw tenax::UsageError("--phases needs --warmup 1 or more");

  tenax::Communicator& world = runtime.world();
  const int n = world.size();
  std::vector<Row> rows;

  // The reference rate of model FLOP utilisation, measured first on rank 0's GPU while the others wait. A machine
  // without a GPU fails here with the same UsageError on every rank (make_cuda_context agrees on it).
  double matmul_rate = 0.0;
  if (on_gpu) {
    (void)tenax::detail::make_cuda_context(world);
    if (world.rank() == 0) matmul_rate = bf16_matmul_rate(0, args["matmul-size"].as<std::size_t>(), 5);
    world.barrier();
  }

  // The reference: one rank, same model and global batch.
  {
    std::unique_ptr<tenax::Communicator> self = world.split(world.rank() == 0 ? 0 : -1, 0, "reference");
    TrainConfig c = base;
    c.engine.layout = tenax::ParallelLayout{1, 1, 1};
    if (self) rows.push_back(measure(*self, c, warmup, steps, "1 rank (reference)"));
    if (self && args.count("phases")) compare_phases(*self, c, warmup, steps);
    if (self && args.count("op-profile")) {
      const std::string window = std::to_string(warmup + 1) + ":" + std::to_string(warmup + steps + 1);
      ::setenv("TENAX_PROFILE_OPS", window.c_str(), 1);
      rows.push_back(measure(*self, c, warmup, steps, "1 rank, op profile on"));
      ::unsetenv("TENAX_PROFILE_OPS");
    }
    world.barrier();
  }
  // Every (tp, pp) whose product divides the world and that the model can be split by; dp fills the rest.
  for (int tp = 1; tp <= (layouts == "all" ? n : 0); ++tp) {
    for (int pp = 1; pp <= n; ++pp) {
      if (n % (tp * pp) != 0) continue;
      for (bool zero1 : {false, true}) {
        const int dp = n / (tp * pp);
        if (zero1 && dp == 1) continue;
        TrainConfig c = base;
        c.engine.layout = tenax::ParallelLayout{tp, pp, dp};
        c.engine.data_parallel.zero1 = zero1;
        const std::string name = "tp=" + std::to_string(tp) + ",pp=" + std::to_string(pp) +
                                 ",dp=" + std::to_string(dp) + (zero1 ? " zero1" : "");
        try {
          rows.push_back(measure(world, c, warmup, steps, name));
        } catch (const tenax::UsageError&) {
          // e.g. more stages than layers, or a batch that does not split: not a layout of this model (every rank
          // refuses it together)
        }
      }
    }
  }
  if (world.rank() == 0) {
    std::printf(
        "# %d ranks, precision %s, model %s vocab %zu hidden %zu layers %zu%s seq %zu, batch %d, "
        "micro-batch %d\n",
        n, std::string(base.engine.precision.name()).c_str(), model.c_str(), base.vocab(), base.hidden(), base.layers(),
        base.gpt ? (" heads " + std::to_string(base.transformer.heads)).c_str() : "", base.engine.seq_len,
        base.engine.global_batch, base.engine.micro_batch);
    std::printf("%s\n# CPU matrix products: %s\n", tenax::bench::machine_line().c_str(),
                tenax::kernels::cpu::describe(tenax::kernels::cpu::blas_core_choice()).c_str());
    if (on_gpu)
      std::printf("# bf16 matmul reference (m=n=k=%zu, bf16 inputs, fp32 accumulate) on rank 0's GPU: %.1f TFLOP/s\n",
                  args["matmul-size"].as<std::size_t>(), matmul_rate / 1e12);
    std::printf("%-24s %12s %14s %10s %12s %14s", "layout", "ms/step", "tokens/s", "vs 1 rank", "last loss",
                "early buckets");
    if (on_gpu) std::printf(" %14s %8s", "model TFLOP/s", "MFU");
    std::printf("\n");
    const double ref = rows.front().tokens_per_s;
    const double flops = model_flops_per_step(base);
    for (const Row& r : rows) {
      std::printf("%-24s %12.2f %14.0f %9.2fx %12.5f %14zu", r.name.c_str(), r.ms_per_step, r.tokens_per_s,
                  r.tokens_per_s / ref, r.last_loss, r.early_buckets);
      if (on_gpu) {
        const double achieved = flops / (r.ms_per_step * 1e-3);
        std::printf(" %14.1f %7.1f%%", achieved / 1e12, 100.0 * achieved / (matmul_rate * r.ranks));
      }
      std::printf("\n");
    }
  }
  return tenax::kExitSuccess;
}

}  // namespace

int main(int argc, char** argv) {
  return tenax::run_main(body, argc, argv);
}
