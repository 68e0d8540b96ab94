// Damaged checkpoints and hostile storage under real mpirun ranks: corrupt, truncated and missing shard files are
// detected and fallen back from; a checkpoint of another model is refused naming the tensor; a full file system gives
// a clear error and loses nothing.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <fstream>

#include "checkpoint/fs_util.hpp"
#include "checkpoint/manifest.hpp"
#include "common/mpi_test.hpp"
#include "test_dirs.hpp"
#include "test_model.hpp"

namespace tenax::test {
namespace {

CheckpointOptions options_for(const std::string& dir, const ParallelLayout& layout, int keep = 5) {
  CheckpointOptions o;
  o.dir = dir;
  o.keep = keep;
  o.layout = layout;
  return o;
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// Flips one byte inside a dataset's stored elements (found through HDF5, so the damage hits data, not free space).
void flip_byte_in_dataset(const std::string& file, const std::string& dataset) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0) << file;
  hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  ASSERT_GE(d, 0) << dataset;
  haddr_t offset = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  ASSERT_NE(offset, HADDR_UNDEF);
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(static_cast<std::streamoff>(offset + 5));
  char c = 0;
  io.read(&c, 1);
  c = static_cast<char>(c ^ 0x10);
  io.seekp(static_cast<std::streamoff>(offset + 5));
  io.write(&c, 1);
}

TEST(CheckpointFaults, CorruptTruncatedAndMissingShardsFallBack) {
  Communicator& world = tenax::test::world();
  // Tensor-parallel over every rank where the model's widths allow it, so that each rank's file holds unique blocks.
  const int n = world.size();
  const ParallelLayout layout = 16 % n == 0 && 12 % n == 0 ? ParallelLayout{n, 1, 1} : ParallelLayout{1, 1, n};
  SharedTempDir dir(world, "damage");
  TestModel model = make_model(layout, world.rank());
  Checkpointer ckpt(world, options_for(dir.path(), layout), model.shards);
  for (std::uint64_t step = 1; step <= 3; ++step) {
    fill(model, 10 + step);
    ckpt.save(step);
  }
  ckpt.wait();
  const std::string victim = ckpt::rank_file_name(layout.tp - 1);  // writes the last block of layers.2.w1
  if (world.rank() == 0) {
    flip_byte_in_dataset(dir / ("step_3/" + victim), "/tensors/layers.2.w1");
    ::truncate((dir / "step_2/rank_00000.h5").c_str(),
               static_cast<off_t>(ckpt::fs::file_size(dir / "step_2/rank_00000.h5") / 2));
  }
  world.barrier();
  scramble(model);
  LoadResult r = ckpt.load();
  EXPECT_TRUE(r.loaded);
  EXPECT_EQ(r.step, 1u);
  EXPECT_EQ(mismatches(model, 11), 0u);
  if (world.rank() == 0)
    for (const auto& why : r.rejected)
      std::printf("rejected: %s\n", why.c_str());
  ASSERT_EQ(r.rejected.size(), 2u);
  EXPECT_TRUE(has(r.rejected[0], "step_3")) << r.rejected[0];
  EXPECT_TRUE(has(r.rejected[0], victim)) << r.rejected[0];
  EXPECT_TRUE(has(r.rejected[0], "CRC32C mismatch")) << r.rejected[0];
  EXPECT_TRUE(has(r.rejected[0], "/tensors/layers.2.w1")) << r.rejected[0];
  EXPECT_TRUE(has(r.rejected[1], "step_2/rank_00000.h5")) << r.rejected[1];
  EXPECT_TRUE(has(r.rejected[1], "truncated")) << r.rejected[1];

  // Only damaged checkpoints left: a clear failure listing each one.
  if (world.rank() == 0) ::unlink((dir / ("step_1/" + victim)).c_str());
  world.barrier();
  std::string message;
  try {
    ckpt.load();
  } catch (const IoError& e) {
    message = e.what();
  }
  EXPECT_TRUE(has(message, "no valid checkpoint in " + dir.path())) << message;
  EXPECT_TRUE(has(message, "step_1/" + victim + ": missing")) << message;
  EXPECT_TRUE(has(message, "step_2")) << message;
  EXPECT_TRUE(has(message, "step_3")) << message;
}

TEST(CheckpointFaults, CorruptManifestFallsBack) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "manifest");
  TestModel model = make_model(layout, world.rank());
  Checkpointer ckpt(world, options_for(dir.path(), layout), model.shards);
  fill(model, 1);
  ckpt.save(1);
  fill(model, 2);
  ckpt.save(2);
  ckpt.wait();
  if (world.rank() == 0) ::truncate((dir / "step_2/manifest.json").c_str(), 100);
  world.barrier();
  LoadResult r = ckpt.load();
  EXPECT_EQ(r.step, 1u);
  EXPECT_EQ(mismatches(model, 1), 0u);
  ASSERT_EQ(r.rejected.size(), 1u);
  EXPECT_TRUE(has(r.rejected[0], "manifest.json is unreadable")) << r.rejected[0];
}

TEST(CheckpointFaults, AnotherModelIsRefusedNamingTheTensor) {
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
    Checkpointer ckpt(world, options_for(dir.path(), layout), model.shards);
    std::string message;
    try {
      ckpt.load();
    } catch (const UsageError& e) {
      message = e.what();
    }
    EXPECT_TRUE(has(message, "'layers.2.w1'")) << message;
    EXPECT_TRUE(has(message, "[8, 16]")) << message;
    EXPECT_TRUE(has(message, "[8, 12]")) << message;
  }
  {  // One tensor the checkpoint does not have.
    TestModel model = make_model(layout, world.rank());
    model.add(TensorShard::whole("adapter/lora_a", DType::F32, {4}, nullptr));
    Checkpointer ckpt(world, options_for(dir.path(), layout), model.shards);
    std::string message;
    try {
      ckpt.load();
    } catch (const UsageError& e) {
      message = e.what();
    }
    EXPECT_TRUE(has(message, "'adapter/lora_a' is not in the checkpoint")) << message;
  }
}

TEST(CheckpointFaults, FullDiskGivesAClearErrorAndLosesNothing) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "full");
  const std::uint64_t bulk = 256 * 1024;  // 1 MiB of f32 per rank
  const std::uint64_t per_checkpoint = bulk * 4 * world.size();
  SmallTmpfs disk(world, dir / "fs", per_checkpoint + per_checkpoint / 2);
  if (!disk.error().empty())
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root or CAP_SYS_ADMIN): " << disk.error();
  {
    TestModel model = make_model(layout, world.rank(), bulk);
    Checkpointer ckpt(world, options_for(dir / "fs", layout), model.shards);
    fill(model, 1);
    ckpt.save(1);
    ckpt.wait();
    fill(model, 2);
    ckpt.save(2);
    std::string message;
    try {
      ckpt.wait();
    } catch (const IoError& e) {
      message = e.what();
    }
    if (world.rank() == 0) std::printf("raised on a full disk: %s\n", message.c_str());
    EXPECT_TRUE(has(message, "No space left on device")) << message;
    EXPECT_TRUE(has(message, "step_2.tmp/rank_")) << message;
    EXPECT_TRUE(has(message, "earlier checkpoints are intact")) << message;
    world.barrier();
    if (world.rank() == 0) {
      EXPECT_FALSE(ckpt::fs::exists(dir / "fs/step_2.tmp"));
      EXPECT_EQ(ckpt::fs::read_file(dir / "fs/latest"), "step_1\n");
    }
    scramble(model);
    LoadResult r = ckpt.load();
    EXPECT_EQ(r.step, 1u);
    EXPECT_TRUE(r.rejected.empty());
    EXPECT_EQ(mismatches(model, 1), 0u);
  }
}

}  // namespace
}  // namespace tenax::test
