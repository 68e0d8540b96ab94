// A run that diverges stops on every rank at the step it happened, before anything of that step is applied or saved:
// non-finite gradients (injected on one rank by a custom module) in fp32, with and without gradient clipping, and fp16
// overflows that keep skipping steps at the smallest loss scale. The checkpoints written before it are kept.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine_test_util.hpp"
#include "tenax/error.hpp"
#include "test_dirs.hpp"

namespace tenax::test {
namespace {

// Runs up to `steps` steps and returns the UsageError's message ("" when none), the step it was raised at and the
// parameter checksum then.
struct Stopped {
  std::string message;
  long at = 0;
  std::uint64_t checksum = 0;
};
// Through Engine::run(), as a training program does: its periodic saves are what must not save the diverged step.
Stopped run_until_stopped(EngineConfig c, int steps, Injection& inject) {
  c.steps = steps;
  Engine engine(world(), c, test_model(&inject), test_data());
  Stopped out;
  inject.current = 1;
  try {
    engine.run([&](const StepResult& r) { inject.current = r.step + 1; });
  } catch (const UsageError& e) {
    out.message = e.what();
    out.at = inject.current;
  }
  out.checksum = engine.parameters_checksum();
  return out;
}

TEST(Divergence, NonFiniteGradientsStopTheRunUnappliedWithTheCheckpointsBeforeKept) {
  for (const float clip : {0.0f, 1.0f}) {
    SCOPED_TRACE("grad_clip " + std::to_string(clip));
    SharedTempDir dir(world(), "engine-diverged");
    EngineConfig c = small_config({2, 1, 2});
    c.grad_clip = clip;
    Injection at3{{3}}, none;
    const std::uint64_t two_steps = train(world(), c, 2, &none).checksum;
    c.checkpoint.dir = dir.path();
    c.checkpoint.every = 1;
    const Stopped stopped = run_until_stopped(c, 6, at3);
    EXPECT_EQ(stopped.at, 3);
    EXPECT_NE(stopped.message.find("training diverged at step 3: its gradients are not finite (not applied)"),
              std::string::npos)
        << stopped.message;
    EXPECT_NE(stopped.message.find("the newest this run committed: step 2"), std::string::npos) << stopped.message;
    EXPECT_EQ(stopped.checksum, two_steps) << "the diverged step's update was applied";
    world().barrier();
    EXPECT_TRUE(std::filesystem::exists(dir.path() + "/step_2/manifest.json"));
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/step_3"));
  }
}

TEST(Divergence, Fp16OverflowsThatKeepSkippingAtTheSmallestScaleStopTheRun) {
  EngineConfig c = small_config({1, 2, 2});
  c.precision = PrecisionPolicy::parse("fp16");
  c.loss_scaler.initial_scale = 4.0f;
  c.loss_scaler.min_scale = 1.0f;
  c.loss_scaler.hysteresis = 1;
  Injection always{{}};
  for (long s = 1; s <= 30; ++s)
    always.steps.insert(s);
  // Steps 1 and 2 back off from 4 to 1; from step 3 on every step overflows at the smallest scale.
  const Stopped stopped = run_until_stopped(c, 30, always);
  EXPECT_EQ(stopped.at, 12);
  EXPECT_NE(stopped.message.find("fp16 overflowed 10 steps in a row at the smallest loss scale"), std::string::npos)
      << stopped.message;
  // A few overflows at the smallest scale are no divergence.
  Injection some{{1, 2, 3, 4, 5, 6}};
  EXPECT_EQ(run_until_stopped(c, 14, some).message, "");
}

}  // namespace
}  // namespace tenax::test
