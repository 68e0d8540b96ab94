// A checkpoint that fails while a training loop only calls progress(), under real mpirun ranks: the error reaches
// every rank at the same call (so none goes on alone into the next collective), names the problem, loses nothing
// committed, and leaves the checkpointer usable: the next checkpoint, driven the same way, commits and loads.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>

#include "common/mpi_test.hpp"
#include "core/file_system.hpp"
#include "test_dirs.hpp"
#include "test_model.hpp"

namespace tenax::test {
namespace {

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// What driving a checkpoint with progress() alone came to.
struct Driven {
  int calls = 0;         // progress() calls made, the last one included
  bool done = false;     // the last call said nothing is in flight
  std::string raised;    // what the last call raised (IoError), empty if nothing
  bool overdue = false;  // 120 s went by: only turns a stuck checkpoint into a failure instead of a hang
};

// Calls progress() once per "step", as a training loop does, until it says nothing is in flight or raises. Every rank
// stops at the same call: the stop is agreed, so a rank that raised alone is seen by the test instead of hanging the
// others in their next call.
Driven drive_with_progress(Communicator& world, Checkpointer& ckpt) {
  Driven d;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    ++d.calls;
    try {
      d.done = ckpt.progress();
    } catch (const IoError& e) {
      d.raised = e.what();
    }
    d.overdue = std::chrono::steady_clock::now() > give_up;
    if (any_rank(world, d.done || !d.raised.empty() || d.overdue)) return d;
  }
}

// Every rank stopped at the same call for the same reason.
void expect_the_same_on_every_rank(Communicator& world, const Driven& d) {
  int calls[2] = {-d.calls, d.calls};
  world.all_reduce(calls, calls, 2, DType::I32, ReduceOp::Max);
  EXPECT_EQ(-calls[0], calls[1]) << "the ranks stopped after different numbers of progress() calls";
  EXPECT_TRUE(every_rank(world, !d.raised.empty()) || every_rank(world, d.raised.empty()))
      << "progress() raised on some ranks only; here: " << (d.raised.empty() ? "nothing" : d.raised);
  EXPECT_FALSE(any_rank(world, d.overdue)) << "the checkpoint was still in flight after 120 s of progress() calls";
}

// A training loop's checkpoint: the model's state for `step`, save(), then progress() once per step until it is done
// or raises; every rank must stop at the same call for the same reason.
Driven save_and_drive(Communicator& world, Checkpointer& ckpt, TestModel& model, std::uint64_t step) {
  fill(model, step);
  ckpt.save(step);
  Driven d = drive_with_progress(world, ckpt);
  expect_the_same_on_every_rank(world, d);
  return d;
}

TEST(CheckpointProgressFaults, AFullDiskReachesEveryRankAtTheSameCallAndTheNextCheckpointCommits) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "progress-full");
  const std::uint64_t bulk = 256 * 1024;  // 1 MiB of f32 per rank
  const std::uint64_t per_checkpoint = bulk * 4 * world.size();
  SmallTmpfs disk(world, dir / "fs", 3 * per_checkpoint);
  if (!disk.error().empty())
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root or CAP_SYS_ADMIN): " << disk.error();
  const std::string filler = dir / "fs/filler";
  TestModel model = make_model(layout, world.rank(), bulk);
  CheckpointOptions options;
  options.dir = dir / "fs";
  options.layout = layout;
  Checkpointer ckpt(world, options, model.shards);

  Driven first = save_and_drive(world, ckpt, model, 1);
  ASSERT_TRUE(first.done && first.raised.empty()) << first.raised;
  ASSERT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(1));

  // Another job fills the file system, leaving half a checkpoint.
  ASSERT_TRUE(every_rank(world, world.rank() != 0 || fill_file_system(filler, per_checkpoint / 2) > 0));
  Driven failed = save_and_drive(world, ckpt, model, 2);
  if (world.rank() == 0) std::printf("progress() raised on a full disk: %s\n", failed.raised.c_str());
  EXPECT_TRUE(has(failed.raised, "checkpoint step 2 failed")) << failed.raised;
  EXPECT_TRUE(has(failed.raised, "No space left on device")) << failed.raised;
  EXPECT_TRUE(has(failed.raised, "committed checkpoints are untouched")) << failed.raised;
  // Nothing is in flight any more, and nothing committed was touched.
  EXPECT_TRUE(ckpt.progress());
  EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(1));
  world.barrier();
  if (world.rank() == 0) {
    EXPECT_FALSE(fs::exists(dir / "fs/step_2.tmp"));
    EXPECT_EQ(fs::read_file(dir / "fs/latest"), "step_1\n");
  }

  // The space comes back; training goes on with the same checkpointer and the same kind of loop.
  world.barrier();
  if (world.rank() == 0) std::filesystem::remove(filler);
  world.barrier();
  Driven next = save_and_drive(world, ckpt, model, 3);
  EXPECT_TRUE(next.done && next.raised.empty()) << next.raised;
  EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(3));
  scramble(model);
  LoadResult r = ckpt.load();
  EXPECT_EQ(r.step, 3u);
  EXPECT_TRUE(r.rejected.empty());
  EXPECT_EQ(mismatches(model, 3), 0u);
}

TEST(CheckpointProgressFaults, AFailedCommitReachesEveryRankAtTheSameCallAndTheNextCheckpointCommits) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "progress-commit");
  TestModel model = make_model(layout, world.rank());
  CheckpointOptions options;
  options.dir = dir.path();
  options.layout = layout;
  Checkpointer ckpt(world, options, model.shards);
  fill(model, 1);
  ckpt.save(1);
  // The commit of step 1 runs after every rank's write is known to be done, a few progress() calls from now; a file
  // already named checkpoint.h5 in step_1.tmp makes it fail.
  if (world.rank() == 0) {
    std::filesystem::create_directories(dir / "step_1.tmp");
    std::ofstream(dir / "step_1.tmp/checkpoint.h5") << "in the way";
  }
  Driven failed = drive_with_progress(world, ckpt);
  expect_the_same_on_every_rank(world, failed);
  if (world.rank() == 0) std::printf("progress() raised on a failed commit: %s\n", failed.raised.c_str());
  EXPECT_TRUE(has(failed.raised, "commit of checkpoint step 1 failed")) << failed.raised;
  EXPECT_TRUE(has(failed.raised, "step_1.tmp/checkpoint.h5: File exists")) << failed.raised;
  EXPECT_TRUE(ckpt.progress());
  EXPECT_EQ(ckpt.last_committed_step(), std::nullopt);
  world.barrier();
  if (world.rank() == 0) {
    EXPECT_FALSE(fs::exists(dir / "step_1"));
    EXPECT_FALSE(fs::exists(dir / "latest"));
  }

  Driven next = save_and_drive(world, ckpt, model, 2);
  EXPECT_TRUE(next.done && next.raised.empty()) << next.raised;
  EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(2));
  world.barrier();
  if (world.rank() == 0) {
    EXPECT_TRUE(fs::exists(dir / "step_2/manifest.json"));
    EXPECT_FALSE(fs::exists(dir / "step_1.tmp"));  // retention removes the failed step's leftovers
  }
  scramble(model);
  LoadResult r = ckpt.load();
  EXPECT_EQ(r.step, 2u);
  EXPECT_EQ(mismatches(model, 2), 0u);
}

}  // namespace
}  // namespace tenax::test
