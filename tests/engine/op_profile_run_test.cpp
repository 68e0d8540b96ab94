// TENAX_PROFILE_OPS=A:B through the engine: the GPT in tp 2 x pp 2 writes one op profile per rank for exactly the
// steps asked, with the calls each pipeline stage makes per step, and a malformed window is refused by name.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/scoped_env.hpp"
#include "engine_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/execution.hpp"
#include "tenax/models.hpp"
#include "test_dirs.hpp"

namespace tenax::test {
namespace {

// calls/step per op name (summed over shapes) from a profile table; the header line in `header`.
std::map<std::string, double> calls_per_step(const std::string& path, std::string& header) {
  std::ifstream in(path);
  std::map<std::string, double> calls;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# op profile", 0) == 0) header = line;
    if (line.empty() || line[0] == '#' || line.rfind("op ", 0) == 0) continue;
    // op [dtype] shape share calls/step ms/step [TFLOP/s] [GB/s]: the calls follow the share ("12.3%").
    std::istringstream words(line);
    std::string op, word;
    words >> op;
    if (op == "(between") words >> word;  // "(between ops)"
    while (words >> word && word.back() != '%') {
    }
    double c = 0;
    words >> c;
    calls[op] += c;
  }
  return calls;
}

TEST(OpProfileRun, EachRankProfilesTheStepsAskedWithItsStagesCalls) {
  SharedTempDir dir(world(), "op-profile");
  ASSERT_FALSE(dir.path().empty());
  EngineConfig c = small_config(Variant{2, 2, 1});
  c.run_dir = dir.path();
  const models::GptConfig g = small_gpt();
  {
    const ScopedEnv window("TENAX_PROFILE_OPS", "2:4");
    Engine engine(world(), c, models::gpt(g), test_data());
    for (int s = 0; s < 4; ++s)
      engine.step();
  }
  world().barrier();
  const std::string path =
      dir / ("metrics/op-profile-steps2-4-rank" + std::to_string(world().rank()) + "-attempt1.txt");
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  std::string header;
  const std::map<std::string, double> calls = calls_per_step(path, header);
  EXPECT_NE(header.find("(host clock)"), std::string::npos) << header;
  EXPECT_NE(header.find("over 2 step(s)"), std::string::npos) << header;
  // Global batch 8, micro-batch 2, dp 1: 4 micro-batches per step; 2 of the 4 blocks per stage, each with two layer
  // norms and four products forward; the last stage adds the final norm, the head and the loss.
  const int stage = (world().rank() / 2) % 2;  // tp is fastest, then dp, then pp
  const bool last = stage == 1;
  EXPECT_EQ(calls.count("(between"), 1u);
  EXPECT_DOUBLE_EQ(calls.at("layernorm_forward"), 4.0 * (4 + (last ? 1 : 0)));
  EXPECT_DOUBLE_EQ(calls.at("layernorm_backward"), 4.0 * (4 + (last ? 1 : 0)));
  EXPECT_DOUBLE_EQ(calls.at("attention_forward"), 4.0 * 2);
  EXPECT_EQ(calls.count("ce_finish"), last ? 1u : 0u);
  if (last) {
    EXPECT_DOUBLE_EQ(calls.at("ce_finish"), 4.0);
  }
  EXPECT_EQ(calls.count("embedding_slice_forward") + calls.count("embedding_forward"), last ? 0u : 1u);
  EXPECT_GT(calls.at("gemm"), 0.0);
  // No file for steps outside the window.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir / "metrics"), std::filesystem::directory_iterator()),
            4);
}

TEST(OpProfileRun, AWindowFromStepZeroStartsAtTheFirstStepAndAnEngineGoneEarlyLeavesNoProfile) {
  SharedTempDir dir(world(), "op-profile-zero");
  EngineConfig c = small_config(Variant{1, 1, 4});
  c.run_dir = dir.path();
  {
    const ScopedEnv window("TENAX_PROFILE_OPS", "0:3");
    Engine engine(world(), c, test_model(), test_data());
    for (int s = 0; s < 3; ++s)
      engine.step();
  }
  world().barrier();
  std::string header;
  const auto calls = calls_per_step(
      dir / ("metrics/op-profile-steps1-3-rank" + std::to_string(world().rank()) + "-attempt1.txt"), header);
  EXPECT_NE(header.find("over 2 step(s)"), std::string::npos) << header;
  EXPECT_GT(calls.count("gemm"), 0u);
  {
    const ScopedEnv window("TENAX_PROFILE_OPS", "1:10");
    Engine engine(world(), c, test_model(), test_data());
    engine.step();
    EXPECT_NE(ExecutionContext::host().op_profiler(), nullptr) << "profiling inside the window";
  }  // gone inside its window
  EXPECT_EQ(ExecutionContext::host().op_profiler(), nullptr) << "the engine left its profile running";
}

TEST(OpProfileRun, AWindowThatIsNotAStepRangeIsRefusedByName) {
  for (const char* bad : {"4:2", "3", "a:b", "-1:3"}) {
    const ScopedEnv window("TENAX_PROFILE_OPS", bad);
    try {
      Engine engine(world(), small_config(Variant{1, 1, 4}), test_model(), test_data());
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("TENAX_PROFILE_OPS"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tenax::test
