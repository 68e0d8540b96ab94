// The GPT decoder (tenax::models::gpt: attention split by heads over tensor parallelism, blocks over pipeline chunks)
// trains to the same losses in every layout and schedule as on one rank (fp32 within 1e-5 relative), and its loss
// falls on data it can learn.
#include <gtest/gtest.h>

#include <cmath>

#include "engine_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/models.hpp"

namespace tenax::test {
namespace {

constexpr int kSteps = 12;

models::GptConfig small_gpt() {
  models::GptConfig g;
  g.vocab = kVocab;
  g.hidden = 32;
  g.layers = 4;
  g.heads = 4;
  g.max_positions = 8;
  g.init_std = 0.1f;
  return g;
}

std::vector<double> gpt_losses(Communicator& comm, const EngineConfig& c, const models::GptConfig& g, int steps) {
  Engine engine(comm, c, models::gpt(g), test_data());
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s)
    losses.push_back(engine.step().loss);
  return losses;
}

TEST(GptLayoutEquivalence, Fp32LossesMatchTheSingleRankRun) {
  const models::GptConfig g = small_gpt();
  EngineConfig one = small_config({});
  std::unique_ptr<Communicator> self = world().split(world().rank() == 0 ? 0 : -1, 0, "gpt-reference");
  std::vector<double> ref(kSteps, 0.0);
  if (self) ref = gpt_losses(*self, one, g, kSteps);
  world().broadcast(ref.data(), ref.size(), DType::F64, 0);
  EXPECT_LT(ref.back(), ref.front() - 0.3) << "the GPT's loss must fall";
  for (const Variant& v : {Variant{1, 1, 4}, Variant{2, 1, 2, true}, Variant{1, 2, 2}, Variant{2, 2, 1},
                           Variant{1, 4, 1}, Variant{4, 1, 1}, Variant{1, 2, 2, false, PipelineKind::Interleaved, 2}}) {
    const std::vector<double> got = gpt_losses(world(), small_config(v), g, kSteps);
    for (int s = 0; s < kSteps; ++s)
      EXPECT_NEAR(got[s], ref[s], 1e-5 * std::fabs(ref[s])) << v.name() << " step " << s + 1;
    if (world().rank() == 0)
      std::printf("  gpt %-28s step-%d loss %.9f  reference %.9f  relative difference %.2e\n", v.name().c_str(),
                  kSteps, got.back(), ref.back(), std::fabs(got.back() / ref.back() - 1));
  }
}

TEST(GptLayoutEquivalence, RecomputingTheAttentionCoreChangesNothing) {
  models::GptConfig g = small_gpt();
  const std::vector<double> stored = gpt_losses(world(), small_config({2, 2, 1}), g, 4);
  g.recompute_attention = true;
  const std::vector<double> recomputed = gpt_losses(world(), small_config({2, 2, 1}), g, 4);
  for (int s = 0; s < 4; ++s)
    EXPECT_EQ(stored[s], recomputed[s]) << "step " << s + 1;
}

TEST(GptLayoutEquivalence, HeadsThatTensorParallelismCannotSplitAreRefused) {
  models::GptConfig g = small_gpt();
  g.heads = 2;
  try {
    Engine engine(world(), small_config({4, 1, 1}), models::gpt(g), test_data());
    ADD_FAILURE() << "4-way tensor parallelism over 2 heads was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide the 2 attention heads"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tenax::test
