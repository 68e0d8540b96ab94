// Bad configurations stop every rank with a UsageError that names the problem and the fix, before any collective.
#include <gtest/gtest.h>

#include <string>

#include "tenax/error.hpp"
#include "training_test_util.hpp"

namespace tenax::test {
namespace {

void expect_usage_error(const examples::TrainConfig& c, const std::string& problem, const std::string& fix) {
  try {
    examples::Trainer trainer(world(), c);
    FAIL() << "expected a UsageError mentioning '" << problem << "'";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(problem), std::string::npos) << what;
    EXPECT_NE(what.find(fix), std::string::npos) << what;
  }
}

TEST(BadInput, LayoutThatDoesNotDivideTheWorld) {
  expect_usage_error(small_config(3, 1, 0), "tp*pp = 3 does not divide the 4 ranks", "choose tp and pp");
  expect_usage_error(small_config(1, 1, 3), "needs tp*pp*dp = 3 ranks but the job has 4", "change the layout");
}

TEST(BadInput, TensorParallelSizeNotDividingTheHiddenSize) {
  examples::TrainConfig c = small_config(4, 1, 1);
  c.model.hidden = 30;
  expect_usage_error(c, "does not divide the hidden size 30", "--hidden");
}

TEST(BadInput, TensorParallelSizeNotDividingTheVocabulary) {
  examples::TrainConfig c = small_config(4, 1, 1);
  c.model.vocab = 66;
  expect_usage_error(c, "does not divide the vocabulary size 66", "--vocab");
}

TEST(BadInput, MorePipelineStagesThanLayers) {
  examples::TrainConfig c = small_config(1, 4, 1);
  c.model.layers = 2;
  expect_usage_error(c, "--pp 4 is greater than the number of layers 2", "--pp <= 2");
}

TEST(BadInput, MicroBatchNotDividingTheBatch) {
  examples::TrainConfig c = small_config(1, 1, 4);
  c.batch = 8;
  c.micro_batch = 3;  // each of the 4 dp ranks gets 2 sequences
  expect_usage_error(c, "micro-batch size 3 does not divide the 2 sequences", "--micro-batch that divides 2");
  c.batch = 6;  // not a multiple of dp = 4
  c.micro_batch = 1;
  expect_usage_error(c, "does not split evenly over 4 data-parallel ranks", "multiple of dp=4");
}

TEST(BadInput, OverflowInjectionNeedsFp16) {
  examples::TrainConfig c = small_config(1, 1, 4);
  c.inject_overflow_at = {1};
  expect_usage_error(c, "fp16 loss scaler", "--precision fp16");
}

TEST(BadInput, WorldStillUsableAfterRejectedConfigurations) {
  // Nothing was half-issued: a valid run right after works.
  EXPECT_EQ(train(world(), small_config(2, 2, 1), 1).losses.size(), 1u);
}

}  // namespace
}  // namespace tenax::test
