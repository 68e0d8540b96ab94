// Text generation stops when the job is being stopped: a SIGTERM or SIGUSR1 on any rank stops every rank at the same
// token, keeping what was generated. A binary of its own: the preemption flag, once set, stays set for the process.
#include <gtest/gtest.h>
#include <signal.h>

#include <vector>

#include "engine_test_util.hpp"
#include "tenax/worker.hpp"

namespace tenax::test {
namespace {

TEST(GenerationStop, ASignalOnOneRankStopsEveryRankAndKeepsThePrompt) {
  Communicator& comm = world();
  Engine engine(comm, small_config({1, 1, comm.size()}), test_model(), test_data());
  const std::vector<std::int32_t> prompt = {1, 2, 3};
  EXPECT_EQ(engine.generate(prompt, 4, 0.0f, 7).size(), 7u) << "before any signal, every token is generated";
  worker::install_preemption_handlers();
  if (comm.rank() == comm.size() - 1) {
    ASSERT_EQ(raise(SIGUSR1), 0);
  }
  // Without the stop, 2^20 forward passes: far beyond the test's time limit.
  const std::vector<std::int32_t> text = engine.generate(prompt, std::size_t{1} << 20, 0.0f, 7);
  EXPECT_EQ(text, prompt) << "stopped before the first token, on every rank";
}

}  // namespace
}  // namespace tenax::test
