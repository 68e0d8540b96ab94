// A checkpoint that is not the one it seems, under real mpirun ranks: one of another model, precision or optimizer is
// refused naming the tensor; a directory copied under another step's name is not taken for that step.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/mpi_test.hpp"
#include "fault_test_util.hpp"
#include "test_dirs.hpp"
#include "test_model.hpp"

namespace tenax::test {
namespace {

// A checkpoint copied under another step's name is not taken for that step (it was: the newest for ever, every
// restart going back to what it held, and retention removing the real ones beside it); a name with leading zeros is
// no checkpoint name at all. Neither is ever removed.
TEST(CheckpointIdentity, ACheckpointUnderAnotherStepsNameIsNotTakenForThatStep) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "renamed");
  TestModel model = make_model(layout, world.rank());
  Checkpointer ckpt(world, options_for(dir.path(), layout, /*keep=*/2), model.shards);
  fill(model, 1);
  ckpt.save(1);
  fill(model, 2);
  ckpt.save(2);
  ckpt.wait();
  if (world.rank() == 0) {
    std::filesystem::copy(dir / "step_1", dir / "step_1000", std::filesystem::copy_options::recursive);
    std::filesystem::copy(dir / "step_1", dir / "step_0500", std::filesystem::copy_options::recursive);
  }
  world.barrier();
  fill(model, 9);
  LoadResult r = ckpt.load();
  EXPECT_EQ(r.step, 2u);
  EXPECT_EQ(mismatches(model, 2), 0u);
  auto listed = [&] {
    std::vector<std::uint64_t> steps;
    for (const CheckpointInfo& c : list_checkpoints(dir.path()))
      steps.push_back(c.step);
    return steps;
  };
  EXPECT_EQ(listed(), (std::vector<std::uint64_t>{2, 1}));
  // Retention (keep 2) keeps the newest real ones and leaves the copies alone.
  fill(model, 3);
  ckpt.save(3);
  ckpt.wait();
  EXPECT_EQ(listed(), (std::vector<std::uint64_t>{3, 2}));
  EXPECT_TRUE(std::filesystem::exists(dir / "step_1000"));
  EXPECT_TRUE(std::filesystem::exists(dir / "step_0500"));
}

// What loading `model` from `dir` is refused with (a UsageError's text; "" when it loads).
std::string load_refusal(Communicator& world, const std::string& dir, const ParallelLayout& layout, TestModel& model) {
  Checkpointer ckpt(world, options_for(dir, layout), model.shards);
  try {
    ckpt.load();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(CheckpointIdentity, AnotherModelIsRefusedNamingTheTensor) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "mismatch");
  {
    TestModel model = make_model(layout, world.rank());
    fill(model, 1);
    Checkpointer ckpt(world, options_for(dir.path(), layout), model.shards);
    ckpt.save(1);
    ckpt.wait();
  }
  {  // One tensor with another shape.
    TestModel model = make_model(layout, world.rank());
    TensorShard* w = model.find("layers.2.w1");
    w->global_shape = {8, 12};
    w->shape = {8, 12};
    const std::string message = load_refusal(world, dir.path(), layout, model);
    EXPECT_TRUE(has(message, "'layers.2.w1'")) << message;
    EXPECT_TRUE(has(message, "[8, 16]")) << message;
    EXPECT_TRUE(has(message, "[8, 12]")) << message;
  }
  {  // One tensor the checkpoint does not have.
    TestModel model = make_model(layout, world.rank());
    model.add(TensorShard::whole("adapter/lora_a", DType::F32, {4}, nullptr));
    const std::string message = load_refusal(world, dir.path(), layout, model);
    EXPECT_TRUE(has(message, "'adapter/lora_a' is not in the checkpoint")) << message;
    EXPECT_TRUE(has(message, "none of them 'adapter/...'): it was saved with another optimizer or precision"))
        << message;
  }
  {  // The same tensor in another precision: said as such, not as another model.
    TestModel model = make_model(layout, world.rank());
    TensorShard* w = model.find("layers.2.w1");
    w->dtype = DType::F16;
    const std::string message = load_refusal(world, dir.path(), layout, model);
    EXPECT_TRUE(has(message,
                    "tensor 'layers.2.w1': the checkpoint holds it in f32, the model in f16: it was saved "
                    "with another precision"))
        << message;
  }
}

}  // namespace
}  // namespace tenax::test
