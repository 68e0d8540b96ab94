// The node-local tier under real mpirun ranks with real HDF5 files: a restart reads each rank's own copy and nothing
// of the shared directory, agrees on a step every rank holds, falls back (and says why) past a damaged or missing
// copy, never reads another run's or another model's copies, and forgets copies of a future the run went back from.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>

#include "checkpoint/local_tier.hpp"
#include "checkpoint/local_tier_cleanup.hpp"
#include "checkpoint/manifest.hpp"
#include "comm/agreement.hpp"
#include "common/mpi_test.hpp"
#include "common/scoped_env.hpp"
#include "core/file_system.hpp"
#include "test_dirs.hpp"
#include "test_model.hpp"
#include "tiered_checkpoints.hpp"

namespace tenax::test {
namespace {

namespace stdfs = std::filesystem;

// This rank's copy directory of `step` under `local_dir` (the only tenax-<key> folder there).
std::string local_copy(const std::string& local_dir, int rank, std::uint64_t step) {
  for (const auto& entry : stdfs::directory_iterator(local_dir))
    if (entry.path().filename().string().rfind("tenax-", 0) == 0)
      return (entry.path() / ("rank_" + std::to_string(rank)) / ("step_" + std::to_string(step))).string();
  return "";
}

// Overwrites every byte of the file's second half: tensor data, so a read of it fails its CRC.
void damage(const std::string& path) {
  const auto size = stdfs::file_size(path);
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(size / 2));
  const std::string junk(size - size / 2, '\x5a');
  f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
}

// Damages every rank file of a shared checkpoint: loading it from there is impossible.
void damage_shared(Communicator& world, const std::string& dir, std::uint64_t step) {
  world.barrier();
  if (world.rank() == 0)
    for (const auto& entry : stdfs::directory_iterator(dir + "/step_" + std::to_string(step)))
      if (entry.path().filename().string().rfind("rank_", 0) == 0) damage(entry.path().string());
  world.barrier();
}

TEST(CheckpointLocalTier, ARestartReadsItsOwnCopyAndNothingShared) {
  Communicator& world = tenax::test::world();
  SharedTempDir dir(world, "tier1"), local(world, "tier0");
  save_10_and_12(world, dir.path(), local.path());
  {  // The newest step exists only node-locally.
    LoadResult r = load_fresh_model(world, dir.path(), local.path(), 12);
    EXPECT_TRUE(r.loaded && r.node_local);
    EXPECT_EQ(r.step, 12u);
    EXPECT_EQ(get_value<int>(r.blobs, "step"), 12);
    EXPECT_EQ(r.path, local_copy(local.path(), world.rank(), 12));
  }
  // The same step in both tiers: the local copy wins, and the shared files are never read (they are damaged here, so
  // a read would fail its CRC and be reported in `rejected`).
  {
    const ParallelLayout layout = layout_for(world.size());
    TestModel model = make_model(layout, world.rank());
    Checkpointer ckpt(world, tiered(dir.path(), local.path(), layout), model.shards);
    fill(model, 20);
    ckpt.save(20, step_blob(20));
    ckpt.wait();
  }
  damage_shared(world, dir.path(), 20);
  LoadResult r = load_fresh_model(world, dir.path(), local.path(), 20);
  EXPECT_TRUE(r.loaded && r.node_local);
  EXPECT_EQ(r.step, 20u);
  EXPECT_TRUE(r.rejected.empty()) << r.rejected.front();
}

// A checkpointer of both tiers whose shared save of step 10 (values 10) is in flight: no call has looked at it since.
struct SharedSaveInFlight {
  SharedSaveInFlight(Communicator& world, const std::string& dir, const std::string& local)
      : layout(layout_for(world.size())),
        model(make_model(layout, world.rank())),
        ckpt(world, tiered(dir, local, layout), model.shards) {
    fill(model, 10);
    ckpt.save(10, step_blob(10));
  }
  ParallelLayout layout;
  TestModel model;
  Checkpointer ckpt;
};

// A node-local copy taken while a shared write is still in flight neither waits for that write (on a slow shared
// directory, seconds) nor disturbs the bytes it is writing: each tier holds its own step's values.
TEST(CheckpointLocalTier, ACopyTakenWhileASharedWriteIsInFlightNeitherWaitsForItNorChangesIt) {
  Communicator& world = tenax::test::world();
  SharedTempDir dir(world, "tier1"), local(world, "tier0");
  {
    SharedSaveInFlight run(world, dir.path(), local.path());
    TestModel& model = run.model;
    Checkpointer& ckpt = run.ckpt;
    fill(model, 12);  // training goes on
    // No call since save() has looked at the shared write: it is in flight here on every rank, however fast the disk.
    ckpt.save_local(12, step_blob(12));
    EXPECT_EQ(ckpt.write_totals().files, 0u) << "save_local() finished the shared write (it waited for it)";
    EXPECT_TRUE(ckpt.in_flight());
    fill(model, 13);
    ckpt.wait();
    EXPECT_EQ(ckpt.write_totals().files, 1u);
    EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(10));
    EXPECT_EQ(ckpt.last_local_step(), std::optional<std::uint64_t>(12));
    EXPECT_EQ(ckpt.commit_counts().node_local, 2u) << "steps 10 and 12";
  }
  world.barrier();
  LoadResult newest = load_fresh_model(world, dir.path(), local.path(), 12);
  EXPECT_TRUE(newest.loaded && newest.node_local);
  EXPECT_EQ(newest.step, 12u);
  EXPECT_EQ(get_value<int>(newest.blobs, "step"), 12);
  // The shared tier alone.
  LoadResult shared = load_fresh_model(world, tiered(dir.path(), "", layout_for(world.size())), 10);
  EXPECT_TRUE(shared.loaded && !shared.node_local);
  EXPECT_EQ(shared.step, 10u);
  EXPECT_EQ(get_value<int>(shared.blobs, "step"), 10);
}

// A training loop that saves a node-local copy at every step, before its progress() call: the shared checkpoint in
// flight still commits (the node-local save acts on the answer progress() asked for; dropping it, as a blocking path
// may not, would leave the shared checkpoint uncommitted until the next save() or wait()).
TEST(CheckpointLocalTier, ASharedCheckpointCommitsWhileNodeLocalCopiesAreSavedAtEveryStep) {
  Communicator& world = tenax::test::world();
  SharedTempDir dir(world, "tier1"), local(world, "tier0");
  SharedSaveInFlight run(world, dir.path(), local.path());
  TestModel& model = run.model;
  Checkpointer& ckpt = run.ckpt;
  // The bound only turns a commit that never comes into a failure instead of a hang.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::uint64_t step = 10;
  bool overdue = false;
  while (ckpt.last_committed_step() != std::optional<std::uint64_t>(10) && !overdue) {
    ++step;
    fill(model, static_cast<int>(step));
    ckpt.save_local(step, step_blob(static_cast<int>(step)));
    ckpt.progress();
    overdue = any_rank(world, std::chrono::steady_clock::now() > give_up);
  }
  ASSERT_FALSE(overdue) << "step 10 not committed after 60 s of save_local() and progress() calls (" << step - 10
                        << " of each)";
  ckpt.wait();
  EXPECT_EQ(ckpt.last_local_step(), std::optional<std::uint64_t>(step));
}

TEST(CheckpointLocalTier, ADamagedCopyOnOneRankFallsBackOnEveryRankAndIsNamed) {
  Communicator& world = tenax::test::world();
  SharedTempDir dir(world, "tier1"), local(world, "tier0");
  save_10_and_12(world, dir.path(), local.path());
  const int victim = world.size() - 1;
  if (world.rank() == victim) damage(local_copy(local.path(), victim, 12) + "/" + ckpt::rank_file_name(victim));
  LoadResult r = load_fresh_model(world, dir.path(), local.path(), 10);
  EXPECT_TRUE(r.loaded && r.node_local);  // step 10's local copies are intact
  EXPECT_EQ(r.step, 10u);
  ASSERT_EQ(r.rejected.size(), 1u);
  EXPECT_NE(r.rejected[0].find("node-local copies of step 12"), std::string::npos) << r.rejected[0];
  EXPECT_NE(r.rejected[0].find("rank " + std::to_string(victim)), std::string::npos) << r.rejected[0];
  EXPECT_NE(r.rejected[0].find(local_copy(local.path(), victim, 12)), std::string::npos) << r.rejected[0];
  // Step 12 is a future the run went back from: its copies are gone on every rank, so a later restart cannot pick it.
  EXPECT_FALSE(stdfs::exists(local_copy(local.path(), world.rank(), 12)));
}

TEST(CheckpointLocalTier, AStepNotHeldByEveryRankIsNotUsed) {
  Communicator& world = tenax::test::world();
  SharedTempDir dir(world, "tier1"), local(world, "tier0");
  save_10_and_12(world, dir.path(), local.path());
  if (world.rank() == 0) stdfs::remove_all(local_copy(local.path(), 0, 12));  // as if rank 0 died while writing it
  LoadResult r = load_fresh_model(world, dir.path(), local.path(), 10);
  EXPECT_TRUE(r.loaded && r.node_local);
  EXPECT_EQ(r.step, 10u);
}

TEST(CheckpointLocalTier, CopiesAreReadOnlyWhenAtLeastAsNewAsTheSharedTier) {
  Communicator& world = tenax::test::world();
  SharedTempDir dir(world, "tier1"), local(world, "tier0");
  const ParallelLayout layout = layout_for(world.size());
  {
    TestModel model = make_model(layout, world.rank());
    {
      Checkpointer ckpt(world, tiered(dir.path(), local.path(), layout), model.shards);
      fill(model, 5);
      ckpt.save_local(5);
      ckpt.wait();
    }
    // Step 9 to the shared tier only (a checkpointer without the local tier, e.g. after the node-local disk failed; one
    // checkpointer per directory at a time).
    Checkpointer shared_only(world, tiered(dir.path(), "", layout), model.shards);
    fill(model, 9);
    shared_only.save(9);
    shared_only.wait();
  }
  LoadResult r = load_fresh_model(world, dir.path(), local.path(), 9);
  EXPECT_TRUE(r.loaded);
  EXPECT_FALSE(r.node_local);
  EXPECT_EQ(r.step, 9u);
}

TEST(CheckpointLocalTier, AnotherRunsOrAnotherModelsCopiesAreNeverRead) {
  Communicator& world = tenax::test::world();
  SharedTempDir dir(world, "tier1"), other(world, "other"), local(world, "tier0");
  save_10_and_12(world, dir.path(), local.path());
  {  // Another run (its own shared directory) on the same nodes: a fresh start.
    const ParallelLayout layout = layout_for(world.size());
    TestModel model = make_model(layout, world.rank());
    scramble(model);
    Checkpointer ckpt(world, tiered(other.path(), local.path(), layout), model.shards);
    EXPECT_FALSE(ckpt.load().loaded);
  }
  // The same directory emptied and used again: a new run id, so step 12's copies are another run's.
  world.barrier();
  if (world.rank() == 0)
    for (const auto& entry : stdfs::directory_iterator(dir.path()))
      stdfs::remove_all(entry.path());
  world.barrier();
  {
    const ParallelLayout layout = layout_for(world.size());
    TestModel model = make_model(layout, world.rank());
    Checkpointer ckpt(world, tiered(dir.path(), local.path(), layout), model.shards);
    EXPECT_FALSE(ckpt.load().loaded);
  }
  // Another model in the original run's place (other shapes) gets a key of its own: a folder beside the old copies,
  // which it never lists (the shared tier then refuses the old checkpoint as another model's).
  SharedTempDir third(world, "tier1b");
  save_10_and_12(world, third.path(), local.path());
  auto key_folders = [&] {
    int n = 0;
    for (const auto& entry : stdfs::directory_iterator(local.path()))
      n += entry.path().filename().string().rfind("tenax-", 0) == 0;
    return n;
  };
  const int before = key_folders();
  world.barrier();
  {
    const ParallelLayout layout = layout_for(world.size());
    TestModel model = make_model(layout, world.rank(), /*extra_f32_elems=*/64);
    Checkpointer ckpt(world, tiered(third.path(), local.path(), layout), model.shards);
    EXPECT_EQ(key_folders(), before + 1);
    EXPECT_THROW(ckpt.load(), UsageError);
  }
}

TEST(CheckpointLocalTier, AFailedLocalWriteIsAWarningAndTheSharedTierGoesOn) {
  Communicator& world = tenax::test::world();
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  SharedTempDir dir(world, "tier1"), base(world, "tier0");
  SmallTmpfs tiny(world, base.path() + "/shm", 64 * 1024);
  ASSERT_EQ(tiny.error(), "");
  const ParallelLayout layout = layout_for(world.size());
  TestModel model = make_model(layout, world.rank(), /*extra_f32_elems=*/64 * 1024);  // 256 KiB: cannot fit
  {
    Checkpointer ckpt(world, tiered(dir.path(), base.path() + "/shm", layout), model.shards);
    fill(model, 3);
    ckpt.save(3);
    ckpt.wait();
    EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(3));
    EXPECT_EQ(ckpt.last_local_step(), std::nullopt);
  }
  LoadResult r = load_fresh_model(world, dir.path(), base.path() + "/shm", 3);
  EXPECT_TRUE(r.loaded);
  EXPECT_FALSE(r.node_local);
}

TEST(CheckpointLocalTier, AnUnusableLocalDirectoryIsAUsageErrorNamingIt) {
  Communicator& world = tenax::test::world();
  SharedTempDir dir(world, "tier1"), base(world, "tier0");
  if (world.rank() == 0) std::ofstream(base.path() + "/a-file") << "x";
  world.barrier();
  const ParallelLayout layout = layout_for(world.size());
  TestModel model = make_model(layout, world.rank());
  try {
    Checkpointer ckpt(world, tiered(dir.path(), base.path() + "/a-file", layout), model.shards);
    ADD_FAILURE() << "a file as the node-local directory was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("TENAX_CKPT_LOCAL_DIR"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(base.path() + "/a-file"), std::string::npos) << e.what();
  }
  // A relative path (resolved against each rank's working directory) or blanks are no node-local directory.
  for (const std::string bad : {"tier0-relative", " "}) {
    try {
      Checkpointer ckpt(world, tiered(dir.path(), bad, layout), model.shards);
      ADD_FAILURE() << "'" << bad << "' was accepted as the node-local directory";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + bad + "' is not an absolute path"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(std::filesystem::exists("tier0-relative")) << "nothing is created for a refused directory";
}

// The copies' folder names the job using them (TENAX_JOB_ID, else SLURM_JOB_ID), so that the job's end removes exactly
// its own; an id that cannot be written on one line is refused, naming the variable.
TEST(CheckpointLocalTier, TheCopiesNameTheirJob) {
  Communicator& world = tenax::test::world();
  SharedTempDir dir(world, "tier1"), local(world, "tier0");
  const ParallelLayout layout = layout_for(world.size());
  TestModel model = make_model(layout, world.rank());
  ::setenv("SLURM_JOB_ID", "777", 1);
  ::setenv("TENAX_JOB_ID", "local-00000000000000cd", 1);
  // The job a checkpointer constructed now names in the copies' folder.
  auto job_named = [&] {
    std::string id;
    {
      Checkpointer ckpt(world, tiered(dir.path(), local.path(), layout), model.shards);
      const std::string folder = stdfs::path(local_copy(local.path(), world.rank(), 0)).parent_path().parent_path();
      std::ifstream file(folder + "/job-id");
      std::getline(file, id);
    }
    world.barrier();
    return id;
  };
  EXPECT_EQ(job_named(), "local-00000000000000cd");
  ::unsetenv("TENAX_JOB_ID");
  EXPECT_EQ(job_named(), "777");  // the next attempt's job
  ::setenv("TENAX_JOB_ID", "two words", 1);
  try {
    Checkpointer ckpt(world, tiered(dir.path(), local.path(), layout), model.shards);
    ADD_FAILURE() << "a job id with a space was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("TENAX_JOB_ID='two words'"), std::string::npos) << e.what();
  }
  ::unsetenv("TENAX_JOB_ID");
  ::unsetenv("SLURM_JOB_ID");
}

// A rank's checkpointer marks its copies' folder as in use: the end of a job on the same node (another component of a
// heterogeneous job, whose copies name the leader's id like this one's) leaves them while any rank lives, and
// removes them once every checkpointer is gone. Rank 0 removes after dropping its own checkpointer, so what keeps the
// folder is the other ranks' locks.
TEST(CheckpointLocalTier, AJobsEndLeavesTheCopiesWhileARankStillUsesThem) {
  Communicator& world = tenax::test::world();
  if (world.size() < 2) GTEST_SKIP() << "needs a second rank to hold the folder";
  SharedTempDir dir(world, "tier1"), local(world, "tier0");
  const ParallelLayout layout = layout_for(world.size());
  TestModel model = make_model(layout, world.rank());
  ::setenv("TENAX_JOB_ID", "local-00000000000000ce", 1);
  auto remove = [&] { return ckpt::remove_job_local_copies(local.path(), "local-00000000000000ce"); };
  std::optional<Checkpointer> ckpt;
  ckpt.emplace(world, tiered(dir.path(), local.path(), layout), model.shards);
  ckpt->save_local(1, step_blob(1));
  ckpt->wait();
  const std::string folder =
      stdfs::path(local_copy(local.path(), world.rank(), 1)).parent_path().parent_path().string();
  world.barrier();
  if (world.rank() == 0) {
    ckpt.reset();
    const auto report = remove();
    EXPECT_TRUE(report.errors.empty()) << report.errors.front();
    EXPECT_EQ(report.removed, 0);
    EXPECT_EQ(report.in_use, std::vector<std::string>{folder});
  }
  world.barrier();
  EXPECT_TRUE(stdfs::exists(local_copy(local.path(), world.rank(), 1) + "/manifest.json"));
  world.barrier();
  ckpt.reset();
  world.barrier();  // every checkpointer is gone
  if (world.rank() == 0) {
    const auto report = remove();
    EXPECT_TRUE(report.errors.empty()) << report.errors.front();
    EXPECT_EQ(report.removed, 1);
    EXPECT_TRUE(report.in_use.empty());
    EXPECT_FALSE(stdfs::exists(folder));
  }
  world.barrier();
  ::unsetenv("TENAX_JOB_ID");
}

// A checkpointer of the job that only reads holds the copies too while it exists (the job's end on the node meanwhile
// leaves them, and its load still finds them), a reader of another job does not (it must not make them stay), and
// a reader makes nothing where there are none.
TEST(CheckpointLocalTier, AReaderOfTheJobKeepsTheCopiesItLoadsAndMakesNothing) {
  Communicator& world = tenax::test::world();
  SharedTempDir dir(world, "tier1"), local(world, "tier0"), empty(world, "tier0-empty");
  const ParallelLayout layout = layout_for(world.size());
  const ScopedEnv job("TENAX_JOB_ID", "local-00000000000000cf");
  auto remove = [&] { return ckpt::remove_job_local_copies(local.path(), "local-00000000000000cf"); };
  auto save_5 = [&] {
    TestModel model = make_model(layout, world.rank());
    Checkpointer writer(world, tiered(dir.path(), local.path(), layout), model.shards);
    fill(model, 5);
    writer.save_local(5, step_blob(5));
    writer.wait();
  };
  save_5();
  const std::string folder =
      stdfs::path(local_copy(local.path(), world.rank(), 5)).parent_path().parent_path().string();
  CheckpointOptions read = tiered(dir.path(), local.path(), layout);
  read.read_only = true;
  TestModel model = make_model(layout, world.rank());
  std::optional<Checkpointer> reader;
  reader.emplace(world, read, model.shards);
  world.barrier();  // every reader exists
  if (world.rank() == 0) {
    const auto report = remove();
    EXPECT_TRUE(report.errors.empty()) << report.errors.front();
    EXPECT_EQ(report.removed, 0);
    EXPECT_EQ(report.in_use, std::vector<std::string>{folder});
  }
  world.barrier();
  const LoadResult r = reader->load();
  EXPECT_TRUE(r.loaded && r.node_local);
  EXPECT_EQ(r.step, 5u);
  EXPECT_TRUE(r.rejected.empty()) << r.rejected.front();
  reader.reset();
  world.barrier();  // every reader is gone
  if (world.rank() == 0) {
    const auto report = remove();
    EXPECT_EQ(report.removed, 1);
    EXPECT_FALSE(stdfs::exists(folder));
  }
  world.barrier();
  // A reader of another job (an evaluation reading this run's checkpoints on the same node) leaves the removal alone.
  save_5();
  {
    const ScopedEnv other("TENAX_JOB_ID", "local-00000000000000d0");
    reader.emplace(world, read, model.shards);
  }
  world.barrier();
  if (world.rank() == 0) {
    const auto report = remove();
    EXPECT_EQ(report.removed, 1);
    EXPECT_TRUE(report.in_use.empty());
    EXPECT_FALSE(stdfs::exists(folder));
  }
  world.barrier();
  reader.reset();
  // Where no copies exist, a reader leaves the directory as it found it.
  CheckpointOptions nothing = tiered(dir.path(), empty.path(), layout);
  nothing.read_only = true;
  {
    Checkpointer none(world, nothing, model.shards);
    EXPECT_FALSE(none.load().loaded);
  }
  world.barrier();
  EXPECT_TRUE(stdfs::is_empty(empty.path()));
}

}  // namespace
}  // namespace tenax::test
