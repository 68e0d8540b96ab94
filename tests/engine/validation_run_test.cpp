// Engine::run with validation: the validation loss comes after the steps ValidationPolicy names (and the last one),
// equals Engine::evaluate over the same samples, is the same in every layout, and every step's loss, tokens and
// validation loss reach <run_dir>/metrics/training.jsonl as they happen.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/json.hpp"
#include "engine_test_util.hpp"
#include "test_dirs.hpp"

namespace tenax::test {
namespace {

// The test data, said to hold `samples` different samples.
class FewSamples : public BatchSource {
 public:
  explicit FewSamples(std::uint64_t samples) : samples_(samples) {}
  void fill(std::uint64_t first, std::size_t count, std::size_t seq_len, std::int32_t* out) const override {
    test_data()->fill(first % samples_, count, seq_len, out);
  }
  std::uint64_t distinct_samples() const override { return samples_; }

 private:
  std::uint64_t samples_;
};

struct Observed {
  std::vector<long> validated_steps;
  std::vector<double> validation_losses, losses;
  double evaluated_after = 0;  // Engine::evaluate over the rounded-up sample count, after run()
};

Observed run_with_validation(const Variant& v, const std::string& run_dir) {
  EngineConfig c = small_config(v);
  c.steps = 5;
  c.run_dir = run_dir;
  c.validation.source = std::make_shared<MarkovSource>(kVocab, 4, 99);  // held-out: another seed
  c.validation.every = 2;
  c.validation.samples = 5;  // rounded up to the global batch of 8
  Engine engine(world(), c, test_model(), test_data());
  EXPECT_EQ(engine.config().validation.samples, 8u);
  Observed o;
  EXPECT_EQ(engine.run([&](const StepResult& r) {
    o.losses.push_back(r.loss);
    if (r.validation_loss) {
      o.validated_steps.push_back(r.step);
      o.validation_losses.push_back(*r.validation_loss);
    }
  }),
            kExitSuccess);
  o.evaluated_after = engine.evaluate(*c.validation.source, 0, 8);
  return o;
}

TEST(EngineValidation, RunValidatesOnScheduleAndLogsProgress) {
  SharedTempDir dir(world(), "validation");
  const Observed o = run_with_validation(Variant{1, 2, 2}, dir / "run");
  EXPECT_EQ(o.validated_steps, (std::vector<long>{2, 4, 5}));
  ASSERT_EQ(o.validation_losses.size(), 3u);
  // The last validation ran on the final weights, over the same 8 samples evaluate() reads.
  EXPECT_EQ(o.validation_losses.back(), o.evaluated_after);
  // Training on the Markov source lowers the held-out loss.
  EXPECT_LT(o.validation_losses.back(), o.validation_losses.front());

  if (world().rank() == 0) {
    std::ifstream in(dir / "run/metrics/training.jsonl");
    ASSERT_TRUE(in) << "training.jsonl was not written";
    std::string line;
    std::vector<json::Value> records;
    while (std::getline(in, line))
      records.push_back(json::Value::parse(line));
    ASSERT_EQ(records.size(), 5u);
    std::size_t validated = 0;
    for (std::size_t i = 0; i < records.size(); ++i) {
      const json::Value& r = records[i];
      EXPECT_EQ(r.at("event").string(), "progress");
      EXPECT_EQ(r.at("attempt").i64(), 1);
      EXPECT_EQ(r.at("step").i64(), static_cast<std::int64_t>(i + 1));
      EXPECT_EQ(r.at("loss").number(), o.losses[i]);  // shortest round-trip form: exact
      EXPECT_EQ(r.at("tokens").u64(), 8u * 8u);
      EXPECT_GT(r.at("step_s").number(), 0.0);
      EXPECT_FALSE(r.at("skipped").boolean());
      if (const json::Value* val = r.find("validation_loss")) {
        ASSERT_LT(validated, o.validation_losses.size());
        EXPECT_EQ(r.at("step").i64(), o.validated_steps[validated]);
        EXPECT_EQ(val->number(), o.validation_losses[validated]);
        ++validated;
      }
    }
    EXPECT_EQ(validated, 3u);
  }
}

TEST(EngineValidation, SameValidationLossInAnotherLayout) {
  SharedTempDir dir(world(), "validation-layouts");
  const Observed a = run_with_validation(Variant{1, 2, 2}, dir / "a");
  const Observed b = run_with_validation(Variant{2, 1, 2}, dir / "b");
  ASSERT_EQ(a.validation_losses.size(), b.validation_losses.size());
  for (std::size_t i = 0; i < a.validation_losses.size(); ++i)
    EXPECT_NEAR(a.validation_losses[i], b.validation_losses[i], 1e-5 * std::abs(a.validation_losses[i]));
}

TEST(EngineValidation, BadPolicyIsRefusedWithTheFix) {
  EngineConfig c = small_config(Variant{1, 1, 4});
  c.validation.source = test_data();
  c.validation.every = -1;
  c.validation.samples = 8;
  try {
    Engine engine(world(), c, test_model(), test_data());
    FAIL() << "a negative validation interval was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("use >= 1, or 0"), std::string::npos) << e.what();
  }
  c.validation.every = 2;
  c.validation.samples = 0;
  try {
    Engine engine(world(), c, test_model(), test_data());
    FAIL() << "a validation pass of 0 samples was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("samples >= 1"), std::string::npos) << e.what();
  }
}

// More samples than the source holds would only repeat them (a typo such as 100000000 ran for hours): a pass covers
// the source's samples once, rounded up to the global batch of 8.
TEST(EngineValidation, APassLongerThanItsSourceCoversEachSampleOnce) {
  EngineConfig c = small_config(Variant{1, 1, 4});
  c.validation.source = std::make_shared<FewSamples>(20);
  for (const std::size_t asked : {std::size_t{100000000}, std::size_t{21}}) {
    c.validation.samples = asked;
    EXPECT_EQ(Engine(world(), c, test_model(), test_data()).config().validation.samples, 24u) << asked;
  }
  c.validation.samples = 12;
  EXPECT_EQ(Engine(world(), c, test_model(), test_data()).config().validation.samples, 16u) << "as before";
}

}  // namespace
}  // namespace tenax::test
