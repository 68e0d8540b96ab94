// The GPT decoder (tenax::models::gpt: attention split by heads over tensor parallelism, blocks over pipeline chunks)
// trains to the same losses in every layout and schedule as on one rank (fp32 within 1e-5 relative), and its loss
// falls on data it can learn. With tied embeddings too: the copies on the first and the last pipeline stage stay
// equal, the model has one table (checksum and checkpoint), and a resume in another layout continues the run.
#include <gtest/gtest.h>

#include <cmath>

#include "engine_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/models.hpp"
#include "test_dirs.hpp"

namespace tenax::test {
namespace {

constexpr int kSteps = 12;

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
      std::printf("  gpt %-28s step-%d loss %.9f  reference %.9f  relative difference %.2e\n", v.name().c_str(), kSteps,
                  got.back(), ref.back(), std::fabs(got.back() / ref.back() - 1));
  }
}

struct TiedRun {
  std::vector<double> losses;
  std::uint64_t initial_checksum = 0;  // before the first step: every layout starts from the same parameters
};

TiedRun tied_run(Communicator& comm, EngineConfig c, int steps) {
  models::GptConfig g = small_gpt();
  g.tie_embeddings = true;
  Engine engine(comm, c, models::gpt(g), test_data());
  TiedRun r;
  r.initial_checksum = engine.parameters_checksum();
  for (int s = 0; s < steps; ++s)
    r.losses.push_back(engine.step().loss);
  return r;
}

TEST(GptTiedEmbeddings, EveryLayoutMatchesTheSingleRankRunAndKeepsOneTable) {
  std::unique_ptr<Communicator> self = world().split(world().rank() == 0 ? 0 : -1, 0, "gpt-tied-reference");
  TiedRun ref;
  ref.losses.assign(kSteps, 0.0);
  if (self) ref = tied_run(*self, small_config({}), kSteps);
  world().broadcast(ref.losses.data(), ref.losses.size(), DType::F64, 0);
  world().broadcast(&ref.initial_checksum, 1, DType::I64, 0);
  EXPECT_LT(ref.losses.back(), ref.losses.front() - 0.3) << "the tied GPT's loss must fall";
  // Untied, the same seed gives another model: the head's table is its own, so the losses differ from the first step.
  std::vector<double> untied(kSteps, 0.0);
  if (self) untied = gpt_losses(*self, small_config({}), small_gpt(), kSteps);
  world().broadcast(untied.data(), untied.size(), DType::F64, 0);
  EXPECT_GT(std::fabs(untied[1] - ref.losses[1]), 1e-3) << "tying changed nothing";
  for (const Variant& v :
       {Variant{1, 2, 2}, Variant{2, 2, 1}, Variant{1, 4, 1}, Variant{4, 1, 1}, Variant{2, 1, 2, true},
        Variant{1, 2, 2, true}, Variant{1, 2, 2, false, PipelineKind::Interleaved, 2}}) {
    const TiedRun got = tied_run(world(), small_config(v), kSteps);
    for (int s = 0; s < kSteps; ++s)
      EXPECT_NEAR(got.losses[s], ref.losses[s], 1e-5 * std::fabs(ref.losses[s])) << v.name() << " step " << s + 1;
    // The checksum counts every parameter once, whichever rank holds it: the table's second copy on the last stage
    // must not be counted again. (A copy that drifted from the first would show in the losses: the head would train
    // on another table than the embedding.)
    EXPECT_EQ(got.initial_checksum, ref.initial_checksum) << v.name();
    if (world().rank() == 0)
      std::printf("  tied gpt %-24s step-%d loss %.9f  reference %.9f  relative difference %.2e\n", v.name().c_str(),
                  kSteps, got.losses.back(), ref.losses.back(), std::fabs(got.losses.back() / ref.losses.back() - 1));
  }
}

TEST(GptTiedEmbeddings, ResumedInAnotherLayoutContinuesTheRun) {
  SharedTempDir dir(world(), "gpt-tied");
  // 6 steps on two stages (a copy of the table on each), saved; resumed on one stage (one copy) and on four.
  EngineConfig first = small_config({1, 2, 2});
  first.checkpoint.dir = dir / "ckpt";
  models::GptConfig g = small_gpt();
  g.tie_embeddings = true;
  const TiedRun straight = tied_run(world(), small_config({1, 2, 2}), 10);
  {
    Engine engine(world(), first, models::gpt(g), test_data());
    for (int s = 0; s < 6; ++s)
      engine.step();
    engine.save();
    engine.wait_for_checkpoint();
  }
  for (const Variant& v : {Variant{2, 1, 2}, Variant{1, 4, 1}}) {
    EngineConfig c = small_config(v);
    c.checkpoint.dir = dir / "ckpt";
    Engine engine(world(), c, models::gpt(g), test_data());
    const ResumeInfo info = engine.resume();
    ASSERT_TRUE(info.resumed);
    ASSERT_EQ(info.step, 6);
    for (int s = 6; s < 10; ++s) {
      const double loss = engine.step().loss;
      EXPECT_NEAR(loss, straight.losses[static_cast<std::size_t>(s)],
                  1e-6 * straight.losses[static_cast<std::size_t>(s)])
          << v.name() << " step " << s + 1;
    }
  }
}

TEST(GptTiedEmbeddings, NamesThatCollideWithoutABorrowAreRefused) {
  // Two modules declaring "head.weight" as their own: a naming mistake, not a tie (on one rank and across stages).
  auto builder = [](bool borrow) {
    return [borrow](const ChunkContext& chunk) -> std::unique_ptr<nn::Module> {
      Communicator& tp = *chunk.tp;
      std::vector<std::unique_ptr<nn::Module>> m;
      if (chunk.first()) m.push_back(std::make_unique<nn::VocabParallelEmbedding>("head", kVocab, kHidden, tp, 0.1f));
      if (chunk.last())
        m.push_back(
            std::make_unique<nn::VocabParallelLoss>("head", kHidden, kVocab, tp, 0.1f, borrow ? "head.weight" : ""));
      return std::make_unique<nn::Sequential>("chunk", std::move(m));
    };
  };
  for (const Variant& v : {Variant{1, 1, 4}, Variant{1, 2, 2}}) {
    try {
      Engine engine(world(), small_config(v), builder(false), test_data());
      ADD_FAILURE() << v.name() << ": two parameters named head.weight were accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("named 'head.weight'"), std::string::npos) << e.what();
    }
    // Declared as borrowed, the same model is a tie and trains.
    Engine engine(world(), small_config(v), builder(true), test_data());
    EXPECT_TRUE(std::isfinite(engine.step().loss)) << v.name();
  }
  // A borrow of a tensor of another size is refused.
  auto mismatched = [](const ChunkContext& chunk) -> std::unique_ptr<nn::Module> {
    Communicator& tp = *chunk.tp;
    std::vector<std::unique_ptr<nn::Module>> m;
    if (chunk.first()) m.push_back(std::make_unique<nn::VocabParallelEmbedding>("wte", kVocab, kHidden, tp, 0.1f));
    if (chunk.last())
      m.push_back(std::make_unique<nn::VocabParallelLoss>("head", kHidden, kVocab, tp, 0.2f, "wte.weight"));
    return std::make_unique<nn::Sequential>("chunk", std::move(m));
  };
  for (const Variant& v : {Variant{1, 1, 4}, Variant{1, 2, 2}}) {
    try {
      Engine engine(world(), small_config(v), mismatched, test_data());
      ADD_FAILURE() << v.name() << ": a borrow with another initialisation was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("wte.weight"), std::string::npos) << e.what();
    }
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
