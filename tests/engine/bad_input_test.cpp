// Bad configurations and models stop every rank with a UsageError that names the problem and the fix, before any
// rank is left waiting in a collective.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>

#include "engine_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/models.hpp"

namespace tenax::test {
namespace {

void expect_usage_error(const EngineConfig& c, const ChunkBuilder& build, const std::string& problem,
                        const std::string& fix) {
  try {
    Engine engine(world(), c, build, test_data());
    FAIL() << "expected a UsageError mentioning '" << problem << "'";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(problem), std::string::npos) << what;
    EXPECT_NE(what.find(fix), std::string::npos) << what;
  }
}

TEST(BadInput, LayoutThatDoesNotFitTheWorld) {
  expect_usage_error(small_config({1, 1, 3}), test_model(), "needs tp*pp*dp = 3 ranks but the job has 4",
                     "change the layout");
  EXPECT_THROW(ParallelLayout::infer(4, 3, 1), UsageError);
}

TEST(BadInput, TensorParallelSizeNotDividingTheModel) {
  // The output layer is split by vocabulary (the MLP's 4x width always divides by 4).
  models::MlpLmConfig m;
  m.hidden = 32;
  m.vocab = 66;
  expect_usage_error(small_config({4, 1, 1}), models::mlp_lm(m),
                     "output: tensor-parallel size 4 does not divide its "
                     "output features (66)",
                     "(ParallelLayout::tp, the examples' --tp) among the divisors of 66");
}

TEST(BadInput, MoreModelChunksThanBlocks) {
  models::MlpLmConfig m;
  m.vocab = 64;
  m.hidden = 32;
  m.layers = 2;
  expect_usage_error(small_config({1, 4, 1}), models::mlp_lm(m), "2 blocks cannot be spread over 4 model chunks",
                     "use fewer stages or more blocks");
}

TEST(BadInput, BatchesThatDoNotSplit) {
  EngineConfig c = small_config({1, 1, 4});
  c.micro_batch = 3;  // each of the 4 dp ranks gets 2 sequences
  expect_usage_error(c, test_model(), "micro-batch of 3 sequences does not divide the 2 sequences",
                     "use a micro-batch that divides 2");
  c.global_batch = 6;  // not a multiple of dp = 4
  c.micro_batch = 1;
  expect_usage_error(c, test_model(), "does not split evenly over 4 data-parallel ranks", "multiple of dp=4");
  // The interleaved schedule runs micro-batches in groups of one per stage.
  EngineConfig il = small_config({1, 4, 1, false, PipelineKind::Interleaved, 1});
  il.micro_batch = 8;  // one micro-batch for four stages
  expect_usage_error(il, test_model(), "not a multiple of 4 stages", "multiple of 4 micro-batches");
  EngineConfig chunks = small_config({1, 2, 2, false, PipelineKind::OneFOneB, 2});
  expect_usage_error(chunks, test_model(), "virtual stages per stage need the interleaved schedule", "interleaved");
}

// Values that would train "successfully" the wrong way (a negative rate climbs the loss) are refused up front.
TEST(BadInput, NegativeOrNonFiniteRatesAndCounts) {
  EngineConfig c = small_config({1, 1, 4});
  c.lr.lr = -1;
  expect_usage_error(c, test_model(), "the learning rate must be a finite number >= 0", "lr -1");
  c.lr.lr = std::numeric_limits<float>::quiet_NaN();
  expect_usage_error(c, test_model(), "the learning rate must be a finite number >= 0", "lr nan");
  c = small_config({1, 1, 4});
  c.lr.warmup_steps = -1;
  expect_usage_error(c, test_model(), "warm-up and decay steps must be >= 0", "warm-up -1");
  c = small_config({1, 1, 4});
  c.optimizer.adamw.weight_decay = -0.1f;
  expect_usage_error(c, test_model(), "the weight decay must be a finite number >= 0", "weight decay");
  c = small_config({1, 1, 4});
  c.lr.min_lr = c.lr.lr * 2;
  expect_usage_error(c, test_model(), "is above the peak learning rate", "give min_lr <= lr");
  c = small_config({1, 1, 4});
  c.checkpoint.keep = -1;
  expect_usage_error(c, test_model(), "keep must be >= 0", "TENAX_CKPT_KEEP");
  expect_usage_error(small_config({1, 1, 4}), ChunkBuilder(), "the model builder (ChunkBuilder) is empty",
                     "pass a function that builds a chunk");
  EXPECT_THROW(Engine::check_generation(std::size_t{1} << 21, 0.7f), UsageError);
  EXPECT_THROW(Engine::check_generation(10, -1.0f), UsageError);
  EXPECT_THROW(Engine::check_generation(10, std::numeric_limits<float>::infinity()), UsageError);
  EXPECT_NO_THROW(Engine::check_generation(std::size_t{1} << 20, 0.0f));
}

TEST(BadInput, AModuleGivenTheWrongInputNamesItself) {
  // A model whose last chunk does not end in a loss, and one whose layer sizes do not chain.
  ChunkBuilder no_loss = [](const ChunkContext&) -> std::unique_ptr<nn::Module> {
    std::vector<std::unique_ptr<nn::Module>> m;
    m.push_back(std::make_unique<nn::Embedding>("embedding", kVocab, kHidden, 1.0f));
    return std::make_unique<nn::Sequential>("chunk", std::move(m));
  };
  expect_usage_error(small_config({1, 1, 4}), no_loss, "the last model chunk must end in a loss module",
                     "nn::VocabParallelLoss");
  ChunkBuilder mismatched = [](const ChunkContext& c) -> std::unique_ptr<nn::Module> {
    std::vector<std::unique_ptr<nn::Module>> m;
    m.push_back(std::make_unique<nn::Embedding>("embedding", kVocab, kHidden, 1.0f));
    m.push_back(std::make_unique<nn::LayerNorm>("ln", kHidden + 1));
    m.push_back(std::make_unique<nn::VocabParallelLoss>("output", kHidden, kVocab, *c.tp, 0.1f));
    return std::make_unique<nn::Sequential>("chunk", std::move(m));
  };
  expect_usage_error(small_config({1, 1, 4}), mismatched, "ln: takes f32[16, 33] but is given f32[16, 32]",
                     "f32[16, 33]");
}

// A model over a rank's host memory limit (TENAX_MEMORY_LIMIT; by default 7/8 of its share of the node's available
// memory) is refused while it is built, before its pages are touched, on every rank: here only rank 1 has a limit
// (64 KiB, under what its parameters, gradients and Adam moments need), and every rank raises rank 1's error.
TEST(BadInput, AModelOverARanksMemoryLimitStopsEveryRankNamingTheSizes) {
  const bool limited = world().rank() == 1;
  ASSERT_EQ(setenv("TENAX_MEMORY_LIMIT", limited ? "64K" : "off", 1), 0);
  expect_usage_error(small_config({1, 2, 2}), test_model(), "the model does not fit in the host memory of rank 1",
                     "over the 64.0 KiB this rank may use (TENAX_MEMORY_LIMIT=64K). Make the model smaller");
  // Under a limit it fits in, the same model trains.
  ASSERT_EQ(setenv("TENAX_MEMORY_LIMIT", limited ? "16M" : "off", 1), 0);
  EXPECT_EQ(train(world(), small_config({1, 2, 2}), 1).losses.size(), 1u);
  ASSERT_EQ(setenv("TENAX_MEMORY_LIMIT", "16", 1), 0);  // no unit
  expect_usage_error(small_config({1, 2, 2}), test_model(), "TENAX_MEMORY_LIMIT must be auto, off or a size",
                     "such as 16G or 512M, not '16'");
  ASSERT_EQ(unsetenv("TENAX_MEMORY_LIMIT"), 0);
}

// run() takes every step itself: its step callback calling run(), step() or resume() is refused, naming the call
// (run() inside it had taken the engine to the end without calling either callback for the steps in between).
TEST(BadInput, RunsStepCallbackMayNotDriveTheEngine) {
  EngineConfig c = small_config({1, 1, 4});
  c.steps = 6;
  Engine engine(world(), c, test_model(), test_data());
  const auto refused = [&](const std::function<void(Engine&)>& call, const std::string& message) {
    try {
      engine.run([&](const StepResult&) { call(engine); });
      ADD_FAILURE() << "expected a UsageError mentioning '" << message << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  refused([](Engine& e) { e.run({}); }, "Engine::run() called from its own step callback");
  refused([](Engine& e) { e.step(); }, "Engine::step() called from run()'s step callback");
  refused([](Engine& e) { e.resume(); }, "Engine::resume() called from run()'s step callback");
  // Each refusal left run() after one step; outside the callback the engine goes on from there.
  EXPECT_EQ(engine.current_step(), 3);
  EXPECT_EQ(engine.step().step, 4);
}

TEST(BadInput, AParameterNameNoCheckpointCouldHoldIsRefusedWithoutCheckpointsToo) {
  ChunkBuilder bad_name = [](const ChunkContext& c) -> std::unique_ptr<nn::Module> {
    std::vector<std::unique_ptr<nn::Module>> m;
    m.push_back(std::make_unique<nn::Embedding>("embedding", kVocab, kHidden, 1.0f));
    m.push_back(std::make_unique<nn::LayerNorm>("blocks//ln", kHidden));
    m.push_back(std::make_unique<nn::VocabParallelLoss>("output", kHidden, kVocab, *c.tp, 0.1f));
    return std::make_unique<nn::Sequential>("chunk", std::move(m));
  };
  expect_usage_error(small_config({1, 1, 4}), bad_name, "a module declares a parameter whose name 'blocks//ln",
                     "has an empty component");
  EngineConfig huge = small_config({1, 1, 4});
  huge.seq_len = std::numeric_limits<std::size_t>::max();
  expect_usage_error(huge, test_model(), "seq_len must be >= 1 and at most 2147483647 tokens", "--seq-len");
}

// generate() is collective: a rank given other arguments than the rest, or one whose arguments are refused, stops
// every rank at once instead of leaving the others waiting for it until the communication timeout.
TEST(BadInput, GenerationArgumentsThatDifferBetweenRanksAreRefusedOnEveryRank) {
  Engine engine(world(), small_config({1, 2, 2}), test_model(), test_data());
  const int last = world().size() - 1;
  const std::vector<std::int32_t> prompt = {1, 2, 3};
  EXPECT_EQ(engine.generate(prompt, 2, 0.0f, 7).size(), 5u);
  try {
    engine.generate(prompt, world().rank() == last ? 3 : 2, 0.0f, 7);
    ADD_FAILURE() << "different token counts were accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("the ranks were given different arguments"), std::string::npos) << e.what();
  }
  try {
    engine.generate(world().rank() == last ? std::vector<std::int32_t>{1, 2, 4} : prompt, 2, 0.0f, 7);
    ADD_FAILURE() << "different prompts were accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("generate() is collective"), std::string::npos) << e.what();
  }
  try {
    engine.generate(world().rank() == last ? std::vector<std::int32_t>{} : prompt, 2, 0.0f, 7);
    ADD_FAILURE() << "an empty prompt on one rank was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(last) + ": generate: the prompt is empty"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(engine.generate(prompt, 2, 0.0f, 7).size(), 5u);  // the engine is still usable
}

TEST(BadInput, WorldStillUsableAfterRejectedConfigurations) {
  // Nothing was half-issued: a valid run right after works.
  EXPECT_EQ(train(world(), small_config({2, 2, 1}), 1).losses.size(), 1u);
}

// A rank given other settings than the rest is refused on every rank, naming the setting and the rank: otherwise it
// would train a drifting replica (seed, rate), report other losses (batch), hang (steps) or split the groups wrongly
// (layout).
TEST(BadInput, ARankGivenOtherSettingsThanTheOthers) {
  const int odd = world().size() - 1;
  struct Case {
    const char* field;
    void (*change)(EngineConfig&);
  };
  for (const Case& k :
       {Case{"seed", [](EngineConfig& c) { c.seed += 1; }}, Case{"steps", [](EngineConfig& c) { c.steps += 10; }},
        Case{"lr", [](EngineConfig& c) { c.lr.lr *= 2; }},
        Case{"precision", [](EngineConfig& c) { c.precision = PrecisionPolicy::parse("bf16"); }},
        Case{"layout", [](EngineConfig& c) {
               c.layout = ParallelLayout{1, 1, 4};
             }}}) {
    SCOPED_TRACE(k.field);
    EngineConfig c = small_config({2, 1, 2});
    if (world().rank() == odd) k.change(c);
    expect_usage_error(c, test_model(),
                       std::string("EngineConfig ") + k.field + " (rank 0 and rank " + std::to_string(odd) + ") differ",
                       "Every rank must be given the same settings");
  }
}

// Data-parallel replicas that build different models (another width on one rank) are refused before their gradient
// reductions sum buffers of different sizes.
TEST(BadInput, DataParallelReplicasThatBuildDifferentModels) {
  models::MlpLmConfig m;
  m.vocab = 64;
  m.hidden = world().rank() == 1 ? 48 : 32;
  expect_usage_error(small_config({1, 1, 4}), models::mlp_lm(m),
                     "data-parallel ranks 0 and 1 of this replica group built different models",
                     "every rank must build the same model");
  // With two pipeline stages only one data-parallel group differs (an extra layer norm on world rank 3): the other
  // group, and the ranks of the stage that does not differ, must stop too instead of waiting in the next collective.
  const ChunkBuilder extra_on_rank_3 = [](const ChunkContext& c) -> std::unique_ptr<nn::Module> {
    std::unique_ptr<nn::Module> chunk = test_model()(c);
    if (world().rank() != 3) return chunk;
    std::vector<std::unique_ptr<nn::Module>> parts;
    if (!c.first()) parts.push_back(std::make_unique<nn::LayerNorm>("extra_ln", kHidden));
    parts.push_back(std::move(chunk));
    if (c.first()) parts.push_back(std::make_unique<nn::LayerNorm>("extra_ln", kHidden));
    return std::make_unique<nn::Sequential>("with_extra", std::move(parts));
  };
  expect_usage_error(small_config({1, 2, 2}), extra_on_rank_3, "of this replica group built different models",
                     "every rank must build the same model");
}

// The ranks of a tensor-parallel group hold different blocks of the same tensors: their models must agree but for
// the blocks' offsets. Unchecked, another width on one rank made the group's all-reduces differ in size.
TEST(BadInput, TensorParallelRanksThatBuildDifferentModels) {
  models::MlpLmConfig m;
  m.vocab = 64;
  m.hidden = world().rank() == 2 ? 48 : 32;
  expect_usage_error(small_config({4, 1, 1}), models::mlp_lm(m),
                     "tensor-parallel ranks 0 and 2 of this tensor-parallel group built different models",
                     "every rank must build the same model");
  // The same model on every rank passes, its blocks at different offsets.
  m.hidden = 32;
  EXPECT_NO_THROW(Engine(world(), small_config({4, 1, 1}), models::mlp_lm(m), test_data()));
}

}  // namespace
}  // namespace tenax::test
