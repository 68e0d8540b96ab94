// Every library module's backward, and a custom layer's written against the same interface, agrees with finite
// differences of its forward pass: inputs and parameters, on the host, one rank (a split of the world) each.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/nn.hpp"

namespace tenax::test {
namespace {

// A custom layer: y = tanh(x) * scale, with a learned per-feature scale. Written by a model developer against
// tenax/module.hpp, host only (it touches its tensors directly).
class ScaledTanh : public nn::Module {
 public:
  ScaledTanh(std::string name, std::size_t features) : Module(std::move(name)), features_(features) {}
  std::vector<ParameterSpec> parameters() const override {
    const auto f = static_cast<std::int64_t>(features_);
    return {{name() + ".scale", {f}, {0}, {f}, false, ParameterInit::Normal, 1.0f}};
  }
  void bind(ParameterBuffers& buffers) override {
    const std::size_t i = buffers.index_of(name() + ".scale");
    scale_ = buffers.weight(i);
    scale_grad_ = buffers.grad(i);
  }
  nn::TensorSpec prepare(const nn::TensorSpec& input, const nn::Geometry& g, int, ExecutionContext&) override {
    spec_ = {{static_cast<std::int64_t>(g.rows()), static_cast<std::int64_t>(features_)}, DType::F32};
    if (!(input == spec_)) throw UsageError(name() + ": wrong input " + nn::to_string(input));
    return spec_;
  }
  void forward(nn::StepState& step, int, const Tensor& x, const Tensor& y) override {
    check_tensor(x, spec_, step.ctx(), "the input");
    for (std::int64_t i = 0; i < x.numel(); ++i)
      y.as<float>()[i] = std::tanh(x.as<float>()[i]) * scale_[i % features_];
  }
  void backward(nn::StepState&, int, const Tensor& x, const Tensor&, const Tensor& dy, const Tensor& dx) override {
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const float t = std::tanh(x.as<float>()[i]);
      scale_grad_[i % features_] += dy.as<float>()[i] * t;
      dx.as<float>()[i] = dy.as<float>()[i] * scale_[i % features_] * (1 - t * t);
    }
  }

 private:
  std::size_t features_;
  const float* scale_ = nullptr;
  float* scale_grad_ = nullptr;
  nn::TensorSpec spec_;
};

constexpr std::size_t kSequences = 2, kSeq = 3, kFeatures = 8;

// Checks dL/d(input) and dL/d(parameters) of L = sum(output * R) (R fixed random; for a loss module L is its loss) by
// central differences at up to 40 sampled elements each. fp32 arithmetic: the step and the tolerance were set from
// the measured differences (largest relative error seen 3e-3 at eps 1e-2), with margin.
void check_gradients(nn::Module& m, const nn::TensorSpec& input_spec, bool loss_module = false) {
  SCOPED_TRACE(m.name());
  std::unique_ptr<Communicator> self = world().split(world().rank(), 0, "self");
  ExecutionContext& ctx = ExecutionContext::host();
  // A borrowed parameter (a tied weight) is the owner's: one buffer, whose gradient both users add into.
  std::vector<ParameterSpec> owned;
  for (const ParameterSpec& p : m.parameters())
    if (!p.borrowed) owned.push_back(p);
  ParameterBuffers buffers(owned, DType::F32, *self, 0, {}, ctx);
  buffers.initialize(11);
  m.bind(buffers);
  const nn::Geometry g{kSequences, kSeq};
  const nn::TensorSpec out_spec = m.prepare(input_spec, g, 1, ctx);
  nn::StepState state;
  state.context = &ctx;
  state.geometry = g;
  Tensor loss = Tensor::zeros({1}, DType::F64);
  state.loss_sum = loss.as<double>();
  state.grad_scale = 1.0f;
  Tensor targets = Tensor::zeros({static_cast<std::int64_t>(g.rows())}, DType::I32);
  std::mt19937 rng(5);
  for (std::int64_t i = 0; i < targets.numel(); ++i)
    targets.as<std::int32_t>()[i] = static_cast<std::int32_t>(rng() % kVocab);
  state.targets = {targets};

  Tensor x = Tensor::zeros(input_spec.shape, input_spec.dtype);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::int64_t i = 0; i < x.numel(); ++i)
    if (input_spec.dtype == DType::F32)
      x.as<float>()[i] = normal(rng);
    else
      x.as<std::int32_t>()[i] = static_cast<std::int32_t>(rng() % kVocab);
  Tensor y = Tensor::zeros(out_spec.shape, DType::F32);
  Tensor r = Tensor::zeros(out_spec.shape, DType::F32);
  for (std::int64_t i = 0; i < r.numel(); ++i)
    r.as<float>()[i] = normal(rng);

  auto objective = [&] {
    *state.loss_sum = 0;
    m.forward(state, 0, x, y);
    if (loss_module) return *state.loss_sum;
    double l = 0;
    for (std::int64_t i = 0; i < y.numel(); ++i)
      l += static_cast<double>(y.as<float>()[i]) * r.as<float>()[i];
    return l;
  };
  objective();
  buffers.zero_grads();
  Tensor dx = input_spec.dtype == DType::F32 ? Tensor::zeros(input_spec.shape, DType::F32) : Tensor();
  m.backward(state, 0, x, y, r, dx);

  constexpr float kEps = 1e-2f;
  constexpr double kTolerance = 2e-2;
  auto check = [&](float* value, double analytic, const std::string& what) {
    const float saved = *value;
    *value = saved + kEps;
    const double up = objective();
    *value = saved - kEps;
    const double down = objective();
    *value = saved;
    const double numeric = (up - down) / (2 * kEps);
    EXPECT_NEAR(analytic, numeric, kTolerance * std::max(1.0, std::fabs(numeric))) << what;
  };
  if (dx.numel() > 0)
    for (int k = 0; k < 40; ++k) {
      const std::int64_t i = static_cast<std::int64_t>(rng() % static_cast<unsigned>(x.numel()));
      check(x.as<float>() + i, dx.as<float>()[i], "input element " + std::to_string(i));
    }
  for (std::size_t p = 0; p < buffers.size(); ++p) {
    const auto n = static_cast<unsigned>(shape_numel(buffers.spec(p).shape));
    for (int k = 0; k < 20; ++k) {
      const std::size_t i = rng() % n;
      check(buffers.weight(p) + i, buffers.grad(p)[i], buffers.spec(p).name + "[" + std::to_string(i) + "]");
    }
  }
}

const nn::TensorSpec kActivations{{static_cast<std::int64_t>(kSequences * kSeq), static_cast<std::int64_t>(kFeatures)},
                                  DType::F32};

TEST(ModuleGradients, ACustomLayerWrittenAgainstTheInterface) {
  ScaledTanh m("custom", kFeatures);
  check_gradients(m, kActivations);
}

TEST(ModuleGradients, LibraryLayers) {
  std::unique_ptr<Communicator> tp = world().split(world().rank(), 0, "tp-self");
  nn::LayerNorm ln("ln", kFeatures);
  check_gradients(ln, kActivations);
  nn::Linear linear("linear", kFeatures, 5, true, 0.5f);
  check_gradients(linear, kActivations);
  nn::ColumnParallelLinear column("column", kFeatures, 6, *tp, true, 0.5f);
  check_gradients(column, kActivations);
  nn::RowParallelLinear row("row", kFeatures, 4, *tp, 0.5f);
  check_gradients(row, kActivations);
  nn::GeluMlp mlp("mlp", kFeatures, 16, *tp, 0.5f, 0.5f);
  check_gradients(mlp, kActivations);
  nn::PositionalEmbedding positions("positions", 4, kFeatures, 0.5f);
  check_gradients(positions, kActivations);
  nn::Embedding embedding("embedding", kVocab, kFeatures, 1.0f);
  check_gradients(embedding, {{static_cast<std::int64_t>(kSequences * kSeq)}, DType::I32});
  nn::VocabParallelEmbedding vocab_embedding("wte", kVocab, kFeatures, *tp, 1.0f);
  check_gradients(vocab_embedding, {{static_cast<std::int64_t>(kSequences * kSeq)}, DType::I32});
  nn::VocabParallelLoss head("head", kFeatures, kVocab, *tp, 0.5f);
  check_gradients(head, kActivations, /*loss_module=*/true);
}

// An output head tied to the input embedding: one table, whose gradient is the sum of both uses.
TEST(ModuleGradients, AHeadTiedToTheEmbedding) {
  std::unique_ptr<Communicator> tp = world().split(world().rank(), 0, "tp-self");
  std::vector<std::unique_ptr<nn::Module>> parts;
  parts.push_back(std::make_unique<nn::VocabParallelEmbedding>("wte", kVocab, kFeatures, *tp, 0.5f));
  parts.push_back(std::make_unique<nn::LayerNorm>("ln", kFeatures));
  parts.push_back(std::make_unique<nn::VocabParallelLoss>("head", kFeatures, kVocab, *tp, 0.5f, "wte.weight"));
  nn::Sequential tied("tied", std::move(parts));
  const std::vector<ParameterSpec> specs = tied.parameters();
  ASSERT_EQ(std::count_if(specs.begin(), specs.end(), [](const ParameterSpec& p) { return p.name == "wte.weight"; }),
            2);
  check_gradients(tied, {{static_cast<std::int64_t>(kSequences * kSeq)}, DType::I32}, /*loss_module=*/true);
}

TEST(ModuleGradients, ResidualBlockOfSequentialModules) {
  std::unique_ptr<Communicator> tp = world().split(world().rank(), 0, "tp-self");
  std::vector<std::unique_ptr<nn::Module>> inner;
  inner.push_back(std::make_unique<nn::LayerNorm>("block.ln", kFeatures));
  inner.push_back(std::make_unique<nn::GeluMlp>("block.mlp", kFeatures, 16, *tp, 0.5f, 0.5f));
  inner.push_back(std::make_unique<ScaledTanh>("block.custom", kFeatures));
  nn::Residual block(std::make_unique<nn::Sequential>("block", std::move(inner)));
  check_gradients(block, kActivations);
}

TEST(ModuleGradients, CausalSelfAttentionAndAWholeTransformerBlock) {
  std::unique_ptr<Communicator> tp = world().split(world().rank(), 0, "tp-self");
  for (bool recompute : {false, true}) {
    SCOPED_TRACE(recompute ? "recomputed probabilities" : "stored probabilities");
    nn::CausalSelfAttention attention("attn", kFeatures, 2, *tp, 0.5f, 0.5f, recompute);
    check_gradients(attention, kActivations);
  }
  std::unique_ptr<nn::Module> block = nn::transformer_block("h.0", kFeatures, 2, 2, *tp, 0.5f, false);
  check_gradients(*block, kActivations);
}

TEST(ModuleGradients, TheCheckFindsAWrongBackward) {
  // A layer whose backward forgets the tanh derivative must fail the same check (run in a child process-free way:
  // count the failures the check records instead of letting them fail this test).
  class Wrong : public ScaledTanh {
   public:
    using ScaledTanh::ScaledTanh;
    void backward(nn::StepState& s, int slot, const Tensor& x, const Tensor& y, const Tensor& dy,
                  const Tensor& dx) override {
      ScaledTanh::backward(s, slot, x, y, dy, dx);
      for (std::int64_t i = 0; i < dx.numel(); ++i)
        dx.as<float>()[i] *= 1.5f;
    }
  };
  Wrong m("wrong", kFeatures);
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    check_gradients(m, kActivations);
  }
  EXPECT_GT(failures.size(), 10) << "a wrong input gradient went unnoticed";
}

}  // namespace
}  // namespace tenax::test
