// Damaged checkpoints and hostile storage under real mpirun ranks: corrupt, truncated and missing shard files are
// detected and fallen back from; a full file system gives a clear error and loses nothing. (A checkpoint that is not
// this model's, or not the step its name says: checkpoint_identity_mpi_test.cpp.)
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "checkpoint/manifest.hpp"
#include "common/mpi_test.hpp"
#include "core/file_system.hpp"
#include "fault_test_util.hpp"
#include "test_dirs.hpp"
#include "test_model.hpp"

namespace tenax::test {
namespace {

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
               static_cast<off_t>(fs::file_size(dir / "step_2/rank_00000.h5") / 2));
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
    EXPECT_TRUE(has(message, "committed checkpoints are untouched")) << message;
    world.barrier();
    if (world.rank() == 0) {
      EXPECT_FALSE(fs::exists(dir / "fs/step_2.tmp"));
      EXPECT_EQ(fs::read_file(dir / "fs/latest"), "step_1\n");
    }
    scramble(model);
    LoadResult r = ckpt.load();
    EXPECT_EQ(r.step, 1u);
    EXPECT_TRUE(r.rejected.empty());
    EXPECT_EQ(mismatches(model, 1), 0u);
  }
}

// A write that fails (here: a blob larger than the disk) is learnt of at the next save(), which raises it only once
// its own checkpoint is under way: a failed write does not cost the next checkpoint too. An emergency checkpoint is
// taken after a failed one all the same, and raises nothing when it commits.
TEST(CheckpointFaults, AFailedWriteLearntOfAtTheNextSaveDoesNotCostThatSave) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "fail-next");
  const std::uint64_t bulk = 256 * 1024;  // 1 MiB of f32 per rank
  const std::uint64_t per_checkpoint = bulk * 4 * world.size();
  SmallTmpfs disk(world, dir / "fs", 4 * per_checkpoint);
  if (!disk.error().empty())
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root or CAP_SYS_ADMIN): " << disk.error();
  Blobs too_large;
  too_large["filler"] = std::vector<std::uint8_t>(4 * per_checkpoint / world.size() + 4096, 0x5a);
  TestModel model = make_model(layout, world.rank(), bulk);
  Checkpointer ckpt(world, options_for(dir / "fs", layout, 2), model.shards);
  fill(model, 1);
  ckpt.save(1);
  ckpt.wait();
  for (const bool emergency : {false, true}) {
    const std::uint64_t failing = emergency ? 4 : 2, next = failing + 1;
    fill(model, static_cast<int>(failing));
    ckpt.save(failing, too_large);
    fill(model, static_cast<int>(next));
    std::string message;
    try {
      if (emergency)
        ckpt.emergency_save(next);
      else
        ckpt.save(next);
    } catch (const IoError& e) {
      message = e.what();
    }
    if (emergency) {
      EXPECT_EQ(message, "") << "the emergency checkpoint committed";
    } else {
      EXPECT_TRUE(has(message, "checkpoint step 2 failed")) << message;
      EXPECT_TRUE(has(message, "No space left on device")) << message;
      EXPECT_EQ(ckpt.step_being_written(), std::optional<std::uint64_t>(next)) << "step 3 is under way all the same";
      ckpt.wait();
    }
    EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(next));
  }
  scramble(model);
  LoadResult r = ckpt.load();
  EXPECT_EQ(r.step, 5u);
  EXPECT_EQ(mismatches(model, 5), 0u);
}

// A tensor every rank holds whole as two row blocks (so any world size has blocks to swap), rows distinct per seed.
struct SplitTensor {
  std::vector<float> data = std::vector<float>(32);
  std::vector<TensorShard> shards() {
    return {TensorShard::block("w", DType::F32, {8, 4}, {0, 0}, {4, 4}, data.data()),
            TensorShard::block("w", DType::F32, {8, 4}, {4, 0}, {4, 4}, data.data() + 16)};
  }
  void fill(int seed) {
    for (int i = 0; i < 32; ++i)
      data[i] = static_cast<float>(seed * 100 + i);
  }
  bool holds(int seed) const {
    for (int i = 0; i < 32; ++i)
      if (data[i] != static_cast<float>(seed * 100 + i)) return false;
    return true;
  }
};

// Rank 0 replaces step_<step>/manifest.json with `edit` applied to it (written whole, as a damaged file would be).
template <class Edit>
void edit_manifest(Communicator& world, const std::string& dir, std::uint64_t step, Edit edit) {
  if (world.rank() == 0) {
    const std::string path = dir + "/step_" + std::to_string(step) + "/manifest.json";
    std::string text = fs::read_file(path);
    edit(text);
    std::ofstream(path, std::ios::trunc) << text;
  }
  world.barrier();
}

TEST(CheckpointFaults, ManifestThatDisagreesWithTheBlocksFallsBack) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "swap");
  SplitTensor t;
  Checkpointer ckpt(world, options_for(dir.path(), layout), t.shards());
  for (int step = 1; step <= 3; ++step) {
    t.fill(step);
    ckpt.save(step);
  }
  ckpt.wait();
  // step 3: the two blocks' offsets swapped by hand in the text (the manifest's checksum no longer matches).
  edit_manifest(world, dir.path(), 3, [](std::string& text) {
    const std::size_t a = text.find("\"offset\": [0,0]"), b = text.find("\"offset\": [4,0]");
    ASSERT_NE(a, std::string::npos);
    ASSERT_NE(b, std::string::npos);
    text.replace(a, 15, "\"offset\": [4,0]");
    text.replace(b, 15, "\"offset\": [0,0]");
  });
  // step 2: the same swap written by a program with a fresh checksum: valid JSON, valid tiling, every CRC intact.
  // Only the datasets' own attributes can tell.
  edit_manifest(world, dir.path(), 2, [](std::string& text) {
    ckpt::Manifest m = ckpt::Manifest::from_json(text);
    auto& blocks = m.tensors.at(0).blocks;
    std::swap(blocks[0].box.offset, blocks[1].box.offset);
    text = m.to_json();
  });
  t.fill(0);
  LoadResult r = ckpt.load();
  EXPECT_EQ(r.step, 1u);
  EXPECT_TRUE(t.holds(1)) << "the tensor must come back whole and in order";
  ASSERT_EQ(r.rejected.size(), 2u);
  EXPECT_TRUE(has(r.rejected[0], "step_3")) << r.rejected[0];
  EXPECT_TRUE(has(r.rejected[0], "checksum mismatch")) << r.rejected[0];
  EXPECT_TRUE(has(r.rejected[1], "step_2")) << r.rejected[1];
  EXPECT_TRUE(has(r.rejected[1], "disagrees with")) << r.rejected[1];
  EXPECT_TRUE(has(r.rejected[1], "offset [4, 0] (manifest: [0, 0])") ||
              has(r.rejected[1], "offset [0, 0] (manifest: [4, 0])"))
      << r.rejected[1];
}

TEST(CheckpointFaults, DamagedUnchecksummedManifestIsNotAModelMismatch) {
  // Manifests of format version 2 carry no checksum of their own. A damaged one must still be told from a checkpoint
  // of another model (which is a usage error, never retried): the rank files say what was really saved.
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "v2damage");
  TestModel model = make_model(layout, world.rank());
  Checkpointer ckpt(world, options_for(dir.path(), layout), model.shards);
  for (std::uint64_t step = 1; step <= 3; ++step) {
    fill(model, step);
    ckpt.save(step);
  }
  ckpt.wait();
  auto as_version_2 = [](std::string& text, const std::string& from, const std::string& to) {
    ckpt::Manifest m = ckpt::Manifest::from_json(text);
    m.version = 2;
    m.vds.reset();
    text = m.to_json();
    const std::size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  // step 3: one digit of a global shape (the blocks no longer tile it); step 2: a dtype (they still do).
  edit_manifest(world, dir.path(), 3, [&](std::string& text) {
    as_version_2(text, "\"name\": \"layers.2.w1\", \"dtype\": \"f32\", \"global_shape\": [8,16]",
                 "\"name\": \"layers.2.w1\", \"dtype\": \"f32\", \"global_shape\": [8,18]");
  });
  edit_manifest(world, dir.path(), 2, [&](std::string& text) {
    as_version_2(text, "\"name\": \"layers.2.w1\", \"dtype\": \"f32\"",
                 "\"name\": \"layers.2.w1\", \"dtype\": \"i32\"");
  });
  scramble(model);
  LoadResult r = ckpt.load();
  EXPECT_EQ(r.step, 1u);
  EXPECT_EQ(mismatches(model, 1), 0u);
  ASSERT_EQ(r.rejected.size(), 2u);
  EXPECT_TRUE(has(r.rejected[0], "cover")) << r.rejected[0];
  EXPECT_TRUE(has(r.rejected[1], "dtype f32 (manifest: i32)")) << r.rejected[1];
}

TEST(CheckpointFaults, DamagedVirtualDatasetFileFallsBack) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "vds");
  SplitTensor t;
  Checkpointer ckpt(world, options_for(dir.path(), layout), t.shards());
  for (int step = 1; step <= 2; ++step) {
    t.fill(step);
    ckpt.save(step);
  }
  ckpt.wait();
  if (world.rank() == 0) {
    std::fstream io(dir / "step_2/checkpoint.h5", std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(200);
    io.put('\x7f');
  }
  world.barrier();
  LoadResult r = ckpt.load();
  EXPECT_EQ(r.step, 1u);
  EXPECT_TRUE(t.holds(1));
  ASSERT_EQ(r.rejected.size(), 1u);
  EXPECT_TRUE(has(r.rejected[0], "step_2/checkpoint.h5")) << r.rejected[0];
  EXPECT_TRUE(has(r.rejected[0], "the file is damaged")) << r.rejected[0];
}

TEST(CheckpointFaults, AFailedCommitKeepsTheNextCheckpoint) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "commitfail");
  SplitTensor t;
  Checkpointer ckpt(world, options_for(dir.path(), layout), t.shards());
  t.fill(1);
  ckpt.save(1);
  // The commit of step 1 runs after its write; a file already named checkpoint.h5 in step_1.tmp makes it fail.
  if (world.rank() == 0) {
    std::filesystem::create_directories(dir / "step_1.tmp");
    std::ofstream(dir / "step_1.tmp/checkpoint.h5") << "in the way";
  }
  t.fill(2);
  ckpt.save(2);  // agrees that step 1 is written and queues its commit, then starts step 2
  std::string message;
  try {
    ckpt.wait();
  } catch (const IoError& e) {
    message = e.what();
  }
  if (world.rank() == 0) std::printf("raised: %s\n", message.c_str());
  EXPECT_TRUE(has(message, "checkpoint step 1")) << message;
  EXPECT_TRUE(has(message, "step 2 was written and is being committed")) << message;
  ckpt.wait();  // commits step 2
  EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(2));
  if (world.rank() == 0) {
    EXPECT_FALSE(fs::exists(dir / "step_1"));
    EXPECT_FALSE(fs::exists(dir / "step_1.tmp"));
    EXPECT_TRUE(fs::exists(dir / "step_2/manifest.json"));
  }
  t.fill(0);
  LoadResult r = ckpt.load();
  EXPECT_EQ(r.step, 2u);
  EXPECT_TRUE(t.holds(2));
}

// settle(step) and emergency_save() answer for their own step only: the failed commits of the steps before (one of
// them learnt of only when their own step is written) are logged, and their step's commit is still waited for.
TEST(CheckpointFaults, SettleAndEmergencySaveAnswerForTheirOwnStepPastAFailedCommitBeforeIt) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "settle");
  SplitTensor t;
  Checkpointer ckpt(world, options_for(dir.path(), layout), t.shards());
  auto block_commit_of = [&](int step) {  // a file named checkpoint.h5 in the way makes the commit fail
    if (world.rank() == 0) {
      const std::string tmp = dir / ("step_" + std::to_string(step) + ".tmp");
      std::filesystem::create_directories(tmp);
      std::ofstream(tmp + "/checkpoint.h5") << "in the way";
    }
  };
  for (const bool emergency : {false, true}) {
    const int blocked = emergency ? 3 : 1, next = blocked + 1;
    t.fill(blocked);
    ckpt.save(static_cast<std::uint64_t>(blocked));
    block_commit_of(blocked);
    t.fill(next);
    ckpt.save(static_cast<std::uint64_t>(next));
    // The emergency save also meets a failed commit of the step just before it, learnt of when it is written.
    if (emergency) block_commit_of(next);
    if (emergency) {
      t.fill(next + 1);
      EXPECT_NO_THROW(ckpt.emergency_save(static_cast<std::uint64_t>(next + 1)));
      EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(next + 1));
    } else {
      EXPECT_NO_THROW(ckpt.settle(static_cast<std::uint64_t>(next)));
      EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(next));
      EXPECT_FALSE(ckpt.in_flight());
    }
  }
  EXPECT_THROW(ckpt.settle(9), IoError) << "a step that was never saved is not committed";
  t.fill(0);
  EXPECT_EQ(ckpt.load().step, 5u);
  EXPECT_TRUE(t.holds(5));
}

TEST(CheckpointFaults, ALatestThatCannotBeMovedLosesNothing) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "latest");
  if (world.rank() == 0) {  // a non-empty directory named latest: rename(latest.tmp, latest) fails
    std::filesystem::create_directories(dir / "latest");
    std::ofstream(dir / "latest/keep") << "x";
  }
  world.barrier();
  SplitTensor t;
  Checkpointer ckpt(world, options_for(dir.path(), layout), t.shards());
  t.fill(1);
  ckpt.save(1);
  EXPECT_NO_THROW(ckpt.wait());
  EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(1));
  if (world.rank() == 0) {
    EXPECT_TRUE(fs::exists(dir / "step_1/manifest.json"));
    EXPECT_FALSE(fs::exists(dir / "latest.tmp")) << "latest.tmp left behind";
  }
  t.fill(0);
  EXPECT_EQ(ckpt.load().step, 1u);
  EXPECT_TRUE(t.holds(1));
}

TEST(CheckpointFaults, SupersededCopiesAreRemovedByRetention) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "superseded");
  SplitTensor t;
  Checkpointer ckpt(world, options_for(dir.path(), layout, /*keep=*/3), t.shards());
  for (int step = 1; step <= 2; ++step) {
    t.fill(step);
    ckpt.save(step);
  }
  ckpt.wait();
  // Resume from step 1 (as after rejecting step 2) and reach step 2 again: the first step_2 is moved aside.
  LoadOptions from_one;
  from_one.step = 1;
  ckpt.load(from_one);
  t.fill(22);
  ckpt.save(2);
  ckpt.wait();
  if (world.rank() == 0) {
    EXPECT_TRUE(fs::exists(dir / "step_2.superseded"));
    EXPECT_TRUE(fs::exists(dir / "step_1"));
  }
  world.barrier();
  t.fill(3);
  ckpt.save(3);
  ckpt.wait();  // keep 3: step_3, step_2, step_1 stay; the superseded copy goes before any of them
  if (world.rank() == 0) {
    EXPECT_FALSE(fs::exists(dir / "step_2.superseded"));
    EXPECT_TRUE(fs::exists(dir / "step_1/manifest.json"));
    EXPECT_TRUE(fs::exists(dir / "step_2/manifest.json"));
    EXPECT_TRUE(fs::exists(dir / "step_3/manifest.json"));
  }
  t.fill(0);
  EXPECT_EQ(ckpt.load(LoadOptions{-1, 2}).step, 2u);
  EXPECT_TRUE(t.holds(22));
}

std::string usage_error_of(Communicator& world, const CheckpointOptions& options, std::vector<TensorShard> shards) {
  try {
    Checkpointer ckpt(world, options, std::move(shards));
  } catch (const UsageError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a usage error: ") + e.what();
  }
  return "no error";
}

TEST(CheckpointFaults, AnUnusableDirectoryIsAUsageErrorAtStartUp) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "unusable");
  SplitTensor t;
  // A path through a regular file.
  if (world.rank() == 0) std::ofstream(dir / "file") << "x";
  world.barrier();
  std::string message = usage_error_of(world, options_for(dir / "file/ckpt", layout), t.shards());
  EXPECT_TRUE(has(message, "the checkpoint directory " + dir / "file/ckpt" + " cannot hold checkpoints")) << message;
  EXPECT_TRUE(has(message, "Not a directory")) << message;
  EXPECT_TRUE(has(message, "--checkpoint-dir")) << message;
  // A read-only mount.
  {
    SmallTmpfs ro(world, dir / "ro", 1 << 20, /*read_only=*/true);
    if (ro.error().empty()) {
      message = usage_error_of(world, options_for(dir / "ro", layout), t.shards());
      EXPECT_TRUE(has(message, "Read-only file system")) << message;
      EXPECT_TRUE(has(message, "rank 0")) << message;
    } else if (world.rank() == 0) {
      std::printf("read-only case skipped: %s\n", ro.error().c_str());
    }
  }
  // A directory that is not the same on every rank (each rank's own path, as a node-local /tmp would be).
  if (world.size() > 1) {
    message = usage_error_of(world, options_for(dir / ("local-" + std::to_string(world.rank())), layout), t.shards());
    EXPECT_TRUE(has(message, "is not the same directory on every rank")) << message;
    EXPECT_TRUE(has(message, "does not see the file")) << message;
  }
  // A read-only checkpointer does not probe: loading from a directory nobody may write still works.
  CheckpointOptions read_only = options_for(dir / "file/ckpt", layout);
  read_only.read_only = true;
  Checkpointer reader(world, read_only, t.shards());
  EXPECT_FALSE(reader.load().loaded);
  EXPECT_THROW(reader.save(1), UsageError);
}

TEST(CheckpointFaults, ABadBlobOnOneRankFailsEveryRankInsteadOfHangingThem) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "blob");
  SplitTensor t;
  Checkpointer ckpt(world, options_for(dir.path(), layout), t.shards());
  Blobs blobs;
  blobs[world.rank() == world.size() - 1 ? "bad name" : "good"] = {1, 2, 3};
  std::string message;
  try {
    ckpt.save(1, blobs);
    ckpt.wait();
  } catch (const UsageError& e) {
    message = e.what();
  }
  EXPECT_TRUE(has(message, "checkpoint blob name 'bad name' contains a space")) << message;
  EXPECT_FALSE(ckpt.in_flight());
  blobs.clear();
  blobs["good"] = {1};
  ckpt.save(1, blobs);  // still usable
  ckpt.wait();
  EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(1));
}

}  // namespace
}  // namespace tenax::test
