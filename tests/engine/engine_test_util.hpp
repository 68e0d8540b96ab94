// Shared setup of the engine tests: a small MLP language model composed from the library's modules (with an optional
// custom module that injects a gradient overflow), a synthetic data source, and runs of the engine on any
// communicator: the world, or rank 0 alone for a single-rank reference whose results every rank receives.
#pragma once

#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/mpi_test.hpp"
#include "tenax/engine.hpp"
#include "tenax/models.hpp"
#include "tenax/nn.hpp"
#include "tenax/synthetic_data.hpp"

namespace tenax::test {

struct Variant {
  int tp = 1, pp = 1, dp = 1;
  bool zero1 = false;
  PipelineKind schedule = PipelineKind::OneFOneB;
  int virtual_stages = 1;
  std::string name() const {
    std::string n = "tp" + std::to_string(tp) + "_pp" + std::to_string(pp) + "_dp" + std::to_string(dp);
    if (zero1) n += "_zero1";
    if (schedule != PipelineKind::OneFOneB) n += "_" + to_string(schedule);
    if (virtual_stages > 1) n += "_v" + std::to_string(virtual_stages);
    return n;
  }
};

constexpr std::size_t kVocab = 64, kHidden = 32, kLayers = 4;

inline EngineConfig small_config(const Variant& v) {
  EngineConfig c;
  c.layout = ParallelLayout{v.tp, v.pp, v.dp};
  c.schedule = v.schedule;
  c.virtual_stages = v.virtual_stages;
  c.data_parallel.zero1 = v.zero1;
  c.global_batch = 8;
  c.micro_batch = 2;
  c.seq_len = 8;
  c.seed = 7;
  c.lr.lr = 3e-3f;
  c.optimizer.adamw.weight_decay = 0.0f;
  c.data_parallel.bucket_bytes = 4096;  // several buckets even in this small model
  c.checkpoint.dir = "none";
  return c;
}

// The GPT of the engine tests: 4 blocks of hidden 32 with 4 heads over the test vocabulary, 8 positions.
inline models::GptConfig small_gpt() {
  models::GptConfig g;
  g.vocab = kVocab;
  g.hidden = 32;
  g.layers = 4;
  g.heads = 4;
  g.max_positions = 8;
  g.init_std = 0.1f;
  return g;
}

// A custom module (identity in forward) whose backward makes one gradient element +inf on world rank `rank` at the
// steps listed: a gradient overflow on one rank only, as a real fp16 overflow would be.
class OverflowInjector : public nn::Module {
 public:
  OverflowInjector(const std::set<long>* steps, const long* current_step, int rank, int world_rank)
      : Module("overflow_injector"), steps_(steps), step_(current_step), inject_(rank == world_rank) {}
  nn::TensorSpec prepare(const nn::TensorSpec& input, const nn::Geometry&, int, ExecutionContext&) override {
    spec_ = input;
    return input;
  }
  void forward(nn::StepState& step, int, const Tensor& input, const Tensor& output) override {
    check_tensor(input, spec_, step.ctx(), "the input");
    step.ctx().copy(output.data(), input.data(), input.nbytes());
  }
  void backward(nn::StepState& step, int, const Tensor&, const Tensor&, const Tensor& output_grad,
                const Tensor& input_grad) override {
    step.ctx().copy(input_grad.data(), output_grad.data(), output_grad.nbytes());
    if (inject_ && steps_->count(*step_)) {
      const float inf = INFINITY;
      step.ctx().upload(input_grad.data(), &inf, sizeof inf);
    }
  }

 private:
  const std::set<long>* steps_;
  const long* step_;
  bool inject_;
  nn::TensorSpec spec_;
};

// The MLP language model of tenax::models::mlp_lm, composed here from library modules, with an OverflowInjector before
// the final layer norm when `inject` is given.
struct Injection {
  std::set<long> steps;
  long current = 0;  // the step being run, set by train()
};
inline ChunkBuilder test_model(Injection* inject = nullptr) {
  return [inject](const ChunkContext& chunk) -> std::unique_ptr<nn::Module> {
    Communicator& tp = *chunk.tp;
    std::vector<std::unique_ptr<nn::Module>> m;
    if (chunk.first()) m.push_back(std::make_unique<nn::Embedding>("embedding", kVocab, kHidden, 1.0f));
    const auto [first, end] = chunk.blocks(kLayers);
    for (std::size_t b = first; b < end; ++b) {
      const std::string name = "blocks." + std::to_string(b);
      std::vector<std::unique_ptr<nn::Module>> inner;
      inner.push_back(std::make_unique<nn::LayerNorm>(name + ".ln", kHidden));
      inner.push_back(std::make_unique<nn::GeluMlp>(name + ".mlp", kHidden, 4 * kHidden, tp, 0.17f, 0.03f));
      m.push_back(std::make_unique<nn::Residual>(std::make_unique<nn::Sequential>(name, std::move(inner))));
    }
    if (chunk.last()) {
      if (inject)
        m.push_back(
            std::make_unique<OverflowInjector>(&inject->steps, &inject->current, world().size() - 1, world().rank()));
      m.push_back(std::make_unique<nn::LayerNorm>("final_ln", kHidden));
      m.push_back(std::make_unique<nn::VocabParallelLoss>("output", kHidden, kVocab, tp, 0.17f));
    }
    return std::make_unique<nn::Sequential>("chunk", std::move(m));
  };
}

inline std::shared_ptr<const BatchSource> test_data() {
  static const auto source = std::make_shared<MarkovSource>(kVocab, 4, 7);
  return source;
}

struct RunResult {
  std::vector<double> losses;
  std::vector<bool> skipped;
  std::vector<float> scales;
  std::uint64_t checksum = 0;
};

inline RunResult train(Communicator& comm, const EngineConfig& config, int steps, Injection* inject = nullptr) {
  Engine engine(comm, config, test_model(inject), test_data());
  RunResult r;
  for (int s = 0; s < steps; ++s) {
    if (inject) inject->current = engine.current_step() + 1;
    const StepResult step = engine.step();
    r.losses.push_back(step.loss);
    r.skipped.push_back(step.skipped);
    r.scales.push_back(step.loss_scale);
  }
  r.checksum = engine.parameters_checksum();
  return r;
}

// The (1,1,1) run of `config` on world rank 0 alone; its losses and checksum are broadcast to every rank.
inline RunResult single_rank_reference(EngineConfig config, int steps) {
  config.layout = ParallelLayout{1, 1, 1};
  config.schedule = PipelineKind::OneFOneB;
  config.virtual_stages = 1;
  Communicator& w = world();
  std::unique_ptr<Communicator> self = w.split(w.rank() == 0 ? 0 : -1, 0, "reference");
  RunResult r;
  if (self) r = train(*self, config, steps);
  r.losses.resize(static_cast<std::size_t>(steps));
  w.broadcast(r.losses.data(), r.losses.size(), DType::F64, 0);
  w.broadcast(&r.checksum, 1, DType::I64, 0);
  return r;
}

}  // namespace tenax::test
