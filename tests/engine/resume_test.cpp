// Checkpoint and resume through the engine: the state it saves (derived from the parameter buffers and the optimizer,
// nothing listed by hand) is the whole training state. Resumed in the same layout a run continues bit for bit; resumed
// in another layout (any world split, schedule or ZeRO setting) it continues within 1e-6 of the loss.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "common/scoped_env.hpp"
#include "engine_test_util.hpp"
#include "test_dirs.hpp"
#include "thread_stats.hpp"

namespace tenax::test {
namespace {

struct Losses {
  std::vector<double> losses;
  std::uint64_t checksum = 0;
};

// Steps 1..first in `a`, saved; then a fresh engine in `b` resumes and runs to `total`.
Losses interrupted(EngineConfig a, EngineConfig b, const std::string& dir, int first, int total, Injection* inject) {
  a.checkpoint.dir = b.checkpoint.dir = dir;
  {
    Engine engine(world(), a, test_model(inject), test_data());
    for (int s = 0; s < first; ++s) {
      if (inject) inject->current = engine.current_step() + 1;
      engine.step();
    }
    engine.save();
    engine.wait_for_checkpoint();
  }
  Engine engine(world(), b, test_model(inject), test_data());
  const ResumeInfo info = engine.resume();
  EXPECT_TRUE(info.resumed);
  EXPECT_EQ(info.step, first);
  EXPECT_EQ(info.saved_layout, *a.layout);
  Losses out;
  while (engine.current_step() < total) {
    if (inject) inject->current = engine.current_step() + 1;
    out.losses.push_back(engine.step().loss);
  }
  out.checksum = engine.parameters_checksum();
  return out;
}

Losses uninterrupted(const EngineConfig& c, int first, int total, Injection* inject) {
  Engine engine(world(), c, test_model(inject), test_data());
  Losses out;
  while (engine.current_step() < total) {
    if (inject) inject->current = engine.current_step() + 1;
    const double loss = engine.step().loss;
    if (engine.current_step() > first) out.losses.push_back(loss);
  }
  out.checksum = engine.parameters_checksum();
  return out;
}

TEST(EngineResume, SameLayoutContinuesBitwise) {
  struct Case {
    Variant v;
    const char* precision;
    bool overflow;
  };
  for (const Case& k :
       {Case{{2, 2, 1}, "fp32", false}, Case{{1, 1, 4, true}, "fp32", false}, Case{{2, 1, 2, true}, "bf16", false},
        Case{{1, 2, 2, false, PipelineKind::Interleaved, 2}, "fp32", false}, Case{{1, 2, 2}, "fp16", true}}) {
    SCOPED_TRACE(k.v.name() + " " + k.precision);
    EngineConfig c = small_config(k.v);
    c.precision = PrecisionPolicy::parse(k.precision);
    c.loss_scaler.hysteresis = 1;
    // fp16: the overflow at step 2 makes the saved scaler state a backed-off one, which the resume must restore.
    Injection inject{{2}}, inject_again{{2}};
    SharedTempDir dir(world(), "engine-resume");
    const Losses want = uninterrupted(c, 3, 6, k.overflow ? &inject : nullptr);
    const Losses got = interrupted(c, c, dir.path(), 3, 6, k.overflow ? &inject_again : nullptr);
    ASSERT_EQ(got.losses.size(), want.losses.size());
    for (std::size_t s = 0; s < want.losses.size(); ++s)
      EXPECT_EQ(got.losses[s], want.losses[s]) << "step " << s + 4;
    EXPECT_EQ(got.checksum, want.checksum);
  }
}

TEST(EngineResume, AnotherLayoutContinuesWithinTheStatedTolerance) {
  const EngineConfig base = small_config({2, 2, 1});
  const Losses want = uninterrupted(base, 4, 8, nullptr);
  double worst = 0;
  for (const Variant& to : {Variant{1, 1, 4, true}, Variant{1, 4, 1, false, PipelineKind::Interleaved, 1},
                            Variant{2, 1, 2}, Variant{1, 2, 2, true, PipelineKind::Interleaved, 2}}) {
    SCOPED_TRACE("tp2_pp2_dp1 -> " + to.name());
    SharedTempDir dir(world(), "engine-reshard");
    const Losses got = interrupted(base, small_config(to), dir.path(), 4, 8, nullptr);
    ASSERT_EQ(got.losses.size(), want.losses.size());
    for (std::size_t s = 0; s < want.losses.size(); ++s) {
      EXPECT_NEAR(got.losses[s], want.losses[s], 1e-6 * std::fabs(want.losses[s])) << "step " << s + 5;
      worst = std::max(worst, std::fabs(got.losses[s] / want.losses[s] - 1));
    }
  }
  if (world().rank() == 0) std::printf("  largest relative loss difference after a resharded resume: %.2e\n", worst);
}

// One step trained and saved with `c` (its checkpoint directory set), for the resume checks below.
void save_one_step(const EngineConfig& c, std::shared_ptr<const BatchSource> data = test_data()) {
  Engine engine(world(), c, test_model(), std::move(data));
  engine.step();
  engine.save();
  engine.wait_for_checkpoint();
}

// A run saved with the small config, resumed with `change` applied: refused with a message holding `expected`.
void expect_resume_refused(const char* tag, void (*change)(EngineConfig&), const std::string& expected) {
  SharedTempDir dir(world(), tag);
  EngineConfig a = small_config({1, 1, 4});
  a.checkpoint.dir = dir.path();
  save_one_step(a);
  EngineConfig b = a;
  change(b);
  Engine engine(world(), b, test_model(), test_data());
  try {
    engine.resume();
    ADD_FAILURE() << "resumed although " << expected;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(EngineResume, ARunSavedWithAnotherBatchIsRefused) {
  expect_resume_refused(
      "engine-batch", [](EngineConfig& c) { c.global_batch = 16; }, "saved with a global batch of 8 sequences");
}

TEST(EngineResume, ARunSavedWithAnotherSequenceLengthIsRefused) {
  expect_resume_refused(
      "engine-seq-len", [](EngineConfig& c) { c.seq_len *= 2; },
      "was saved with sequences of " + std::to_string(small_config({1, 1, 4}).seq_len) + " tokens");
}

// What shapes do not show (a GPT's heads, its tied embeddings) is in the model's description: a resume from a model
// described otherwise is refused (it would read the same weights as another model), one described alike or not at
// all goes on.
TEST(EngineResume, ARunSavedByAModelDescribedOtherwiseIsRefused) {
  SharedTempDir dir(world(), "engine-model");
  EngineConfig a = small_config({1, 1, 4});
  a.checkpoint.dir = dir.path();
  a.model_description = "test heads=2";
  save_one_step(a);
  EngineConfig b = a;
  b.model_description = "test heads=4";
  try {
    Engine(world(), b, test_model(), test_data()).resume();
    ADD_FAILURE() << "resumed a checkpoint of another model";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("was saved by the model 'test heads=2', this run builds 'test heads=4'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(Engine(world(), a, test_model(), test_data()).resume().resumed);
  b.model_description.clear();
  EXPECT_TRUE(Engine(world(), b, test_model(), test_data()).resume().resumed);
}

// The test data under a name of its own, as a dataset names itself.
class NamedSource : public BatchSource {
 public:
  explicit NamedSource(std::string name) : name_(std::move(name)) {}
  void fill(std::uint64_t first, std::size_t count, std::size_t seq_len, std::int32_t* out) const override {
    test_data()->fill(first, count, seq_len, out);
  }
  std::string identity() const override { return name_; }

 private:
  std::string name_;
};

// Resuming on other data is allowed (a deliberate switch of corpus) but said: the position continues over other
// samples.
TEST(EngineResume, ARunResumedOnOtherDataIsWarnedOf) {
  SharedTempDir dir(world(), "engine-other-data");
  EngineConfig c = small_config({1, 1, 4});
  c.checkpoint.dir = dir.path();
  save_one_step(c, std::make_shared<NamedSource>("corpus A"));
  for (const char* name : {"corpus A", "corpus B"}) {
    SCOPED_TRACE(name);
    Engine engine(world(), c, test_model(), std::make_shared<NamedSource>(name));
    if (world().rank() == 0) testing::internal::CaptureStderr();
    EXPECT_EQ(engine.resume().step, 1);
    if (world().rank() != 0) continue;
    const std::string log = testing::internal::GetCapturedStderr();
    const bool warned = log.find(
                            "was saved by a run reading corpus A; this run reads corpus B: training continues "
                            "at sample position 8 of the other data") != std::string::npos;
    EXPECT_EQ(warned, std::string(name) == "corpus B") << log;
  }
}

// A run resumed at its last step (a finished run started again, or relaunched after its final checkpoint committed)
// has nothing to train and ends as it ended; its checkpoint was committed by the earlier run, so neither the final
// save nor an explicit save() at that step asks this run to have committed it.
TEST(EngineResume, ARunResumedAtItsLastStepEndsAtOnce) {
  SharedTempDir dir(world(), "engine-finished");
  EngineConfig c = small_config({1, 1, 4});
  c.checkpoint.dir = dir.path();
  c.steps = 3;
  std::uint64_t finished = 0;
  {
    Engine engine(world(), c, test_model(), test_data());
    ASSERT_EQ(engine.run(), kExitSuccess);
    finished = engine.parameters_checksum();
  }
  {
    Engine again(world(), c, test_model(), test_data());
    EXPECT_EQ(again.run(), kExitSuccess);
    EXPECT_EQ(again.current_step(), 3);
    EXPECT_EQ(again.parameters_checksum(), finished);
  }
  Engine by_hand(world(), c, test_model(), test_data());
  ASSERT_EQ(by_hand.resume().step, 3);
  EXPECT_NO_THROW(by_hand.save());
  EXPECT_NO_THROW(by_hand.wait_for_checkpoint());
}

// Resumed at its last step from a node-local copy alone (the shared checkpoint of that step is gone): the final save
// writes the shared copy, which the job's end would otherwise leave nowhere (node-local copies go with the job).
TEST(EngineResume, AResumeAtTheLastStepFromANodeLocalCopyWritesTheSharedOne) {
  SharedTempDir dir(world(), "engine-final-local"), local(world(), "engine-final-local-tier");
  EngineConfig c = small_config({1, 1, 4});
  c.checkpoint.dir = dir.path();
  c.checkpoint.local_dir = local.path();
  c.checkpoint.local_every = 1;
  c.steps = 3;
  {
    Engine engine(world(), c, test_model(), test_data());
    ASSERT_EQ(engine.run(), kExitSuccess);
  }
  world().barrier();
  if (world().rank() == 0) std::filesystem::remove_all(dir.path() + "/step_3");
  world().barrier();
  Engine again(world(), c, test_model(), test_data());
  EXPECT_EQ(again.run(), kExitSuccess);
  world().barrier();
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/step_3/manifest.json")) << "the final weights are only node-local";
}

// The engine builds its checkpointer's options itself: the checkpoint variables a user sets must still reach it.
TEST(EngineResume, TheCheckpointEnvironmentReachesTheEnginesCheckpointer) {
  SharedTempDir dir(world(), "engine-env");
  EngineConfig c = small_config({1, 1, 4});
  c.checkpoint.dir = dir.path();
  const ScopedEnv threads("TENAX_CKPT_STAGING_THREADS", "3"), nice("TENAX_CKPT_IO_NICE", "5");
  const int base = ::getpriority(PRIO_PROCESS, 0);
  {
    Engine engine(world(), c, test_model(), test_data());
    engine.step();
    engine.save();  // the I/O thread has taken its niceness before it runs its first job
    engine.wait_for_checkpoint();
    EXPECT_EQ(threads_named("tenax-ckpt-stg"), 2) << "TENAX_CKPT_STAGING_THREADS=3: two helpers";
    EXPECT_EQ(thread_niceness("tenax-ckpt-io"), std::min(19, base + 5)) << "TENAX_CKPT_IO_NICE=5";
  }
  const ScopedEnv kernel("TENAX_CKPT_STAGING_KERNEL", "no-such-kernel");
  try {
    Engine engine(world(), c, test_model(), test_data());
    ADD_FAILURE() << "TENAX_CKPT_STAGING_KERNEL=no-such-kernel accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'no-such-kernel' is not a copy kernel this CPU has"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tenax::test
