// stage_dataset under mpirun (1, 2 and 4 ranks on one machine): one copier per node (nodes simulated with node
// names), reuse of a valid copy, replacement of corrupt and foreign copies, fall-back on a full or read-only local
// disk (a small tmpfs, mounted by rank 0 as root; skipped with a message where mounting is impossible), and a damaged
// shared dataset refused on every rank.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "comm/agreement.hpp"
#include "common/mpi_test.hpp"
#include "core/abandoned_siblings.hpp"
#include "data/dataset_index.hpp"
#include "data/staging_copy.hpp"
#include "data_test_util.hpp"
#include "tenax/data_staging.hpp"
#include "tenax/error.hpp"
#include "tenax/token_dataset.hpp"

namespace tenax::test {
namespace {

using ::testing::HasSubstr;
namespace stdfs = std::filesystem;

// A scratch directory made by rank 0, known to all ranks, removed after every rank is done with it.
class SharedScratch {
 public:
  explicit SharedScratch(const std::string& tag) {
    std::unique_ptr<ScratchDir> made;
    if (world().rank() == 0) dir_ = std::make_unique<ScratchDir>(tag);
    path_ = broadcast_string(world(), dir_ ? dir_->path() : std::string(), 0);
  }
  ~SharedScratch() { world().barrier(); }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::unique_ptr<ScratchDir> dir_;  // rank 0 owns (and removes) it
  std::string path_;
};

// The synthetic dataset, written by rank 0 before the others look at it.
void write_dataset(const SharedScratch& dir, const std::string& name = "ds", const std::string& label = "synthetic") {
  if (world().rank() == 0) write_synthetic(dir / name, 20000, 3000, 65536, 6000, 1000, label);
  world().barrier();
}

std::vector<std::int32_t> samples(const std::string& dir) {
  TokenDataset ds(dir, {.split = Split::Train, .seq_len = 100, .seed = 4});
  std::vector<std::int32_t> out(50 * ds.sample_tokens());
  ds.fill(1000, 50, out.data());
  return out;
}

// Every rank's outcome, for checks that must hold on all ranks (each rank checks its own, then all agree).
int count_copiers(bool copier) {
  std::int32_t n = copier ? 1 : 0;
  world().all_reduce(&n, &n, 1, DType::I32, ReduceOp::Sum);
  return n;
}

TEST(Staging, OffWithoutAStageDirectory) {
  SharedScratch dir("off");
  write_dataset(dir);
  const StagingResult r = stage_dataset(world(), dir / "ds");
  EXPECT_EQ(r.outcome, StagingOutcome::Off);
  EXPECT_EQ(r.dir, dir / "ds");
}

TEST(Staging, OneCopierPerNodeThenReuse) {
  SharedScratch dir("copy");
  write_dataset(dir);
  // Two simulated nodes (ranks 0,1 -> a; 2,3 -> b), each with its own local directory.
  const int rank = world().rank();
  const std::string node = rank < 2 ? "a" : "b";
  const StagingOptions opt{.stage_dir = dir / ("local-" + node), .node_name = node};
  const StagingResult r = stage_dataset(world(), dir / "ds", opt);
  EXPECT_EQ(r.outcome, StagingOutcome::Copied) << r.reason;
  EXPECT_TRUE(r.reason.empty()) << r.reason;
  EXPECT_EQ(r.copier, rank == 0 || rank == 2);
  EXPECT_EQ(r.node_ranks, std::min(2, world().size() - (rank < 2 ? 0 : 2)));
  EXPECT_EQ(count_copiers(r.copier), world().size() > 2 ? 2 : 1);
  EXPECT_THAT(r.dir, HasSubstr(opt.stage_dir + "/tenax-data-"));
  EXPECT_EQ(r.files, 7u);  // index, tokenizer, 4 train and 1 validation shards
  EXPECT_GT(r.bytes_copied, 46000u);
  EXPECT_GE(r.bytes_verified, r.bytes_copied - 1000);  // everything but the index read back
  EXPECT_GT(r.node_seconds, 0.0);
  EXPECT_EQ(samples(r.dir), samples(dir / "ds"));
  // Only the copy under its key: no temporary directories left.
  world().barrier();
  std::vector<std::string> entries;
  for (const auto& e : stdfs::directory_iterator(opt.stage_dir))
    entries.push_back(e.path().string());
  EXPECT_EQ(entries, std::vector<std::string>{r.dir});

  const StagingResult again = stage_dataset(world(), dir / "ds", opt);
  EXPECT_EQ(again.outcome, StagingOutcome::Reused) << again.reason;
  EXPECT_EQ(again.dir, r.dir);
  EXPECT_EQ(again.bytes_copied, 0u);
  EXPECT_GT(again.bytes_verified, 46000u);
}

TEST(Staging, ChangedDatasetGetsItsOwnCopy) {
  SharedScratch dir("changed");
  write_dataset(dir, "ds", "first");
  const StagingOptions opt{.stage_dir = dir / "local"};
  const StagingResult first = stage_dataset(world(), dir / "ds", opt);
  ASSERT_EQ(first.outcome, StagingOutcome::Copied);
  // The shared dataset is re-created at the same path with other contents: its index checksum changes.
  if (world().rank() == 0) stdfs::remove_all(dir / "ds");
  write_dataset(dir, "ds", "second");
  const StagingResult second = stage_dataset(world(), dir / "ds", opt);
  EXPECT_EQ(second.outcome, StagingOutcome::Copied);
  EXPECT_NE(second.dir, first.dir);
  EXPECT_EQ(TokenDataset(second.dir, {.seq_len = 8}).info().index_crc32c,
            TokenDataset(dir / "ds", {.seq_len = 8}).info().index_crc32c);
}

TEST(Staging, CorruptStagedShardIsReplacedAndSaidSo) {
  SharedScratch dir("corrupt");
  write_dataset(dir);
  const StagingOptions opt{.stage_dir = dir / "local"};
  const StagingResult first = stage_dataset(world(), dir / "ds", opt);
  ASSERT_EQ(first.outcome, StagingOutcome::Copied);
  if (world().rank() == 0) flip_byte(first.dir + "/train-00002.tok", 64 + 999);
  world().barrier();
  const StagingResult r = stage_dataset(world(), dir / "ds", opt);
  EXPECT_EQ(r.outcome, StagingOutcome::Copied);
  EXPECT_EQ(r.dir, first.dir);
  EXPECT_THAT(r.reason,
              AllOf(HasSubstr("train-00002.tok"), HasSubstr("payload checksum mismatch"), HasSubstr("was replaced")));
  EXPECT_EQ(samples(r.dir), samples(dir / "ds"));
  std::ostringstream ignored;
  EXPECT_EQ(stage_dataset(world(), dir / "ds", opt).outcome, StagingOutcome::Reused);
}

TEST(Staging, ForeignDirectoryUnderTheKeyIsReplaced) {
  SharedScratch dir("foreign");
  write_dataset(dir, "ds", "mine");
  write_dataset(dir, "other", "theirs");
  const StagingOptions opt{.stage_dir = dir / "local"};
  std::string key;
  if (world().rank() == 0) {
    // Another dataset's files where this one's copy would be (a stale or hand-made directory).
    key = dir / ("local/" + data::staged_dir_name(data::read_index(dir / "ds").index_crc32c));
    stdfs::create_directories(dir / "local");
    stdfs::copy(dir / "other", key, stdfs::copy_options::recursive);
  }
  world().barrier();
  const StagingResult r = stage_dataset(world(), dir / "ds", opt);
  EXPECT_EQ(r.outcome, StagingOutcome::Copied);
  EXPECT_THAT(r.reason, HasSubstr("differs from the shared dataset's index"));
  EXPECT_EQ(samples(r.dir), samples(dir / "ds"));
}

TEST(Staging, DamagedSharedDatasetFailsOnEveryRank) {
  SharedScratch dir("source");
  write_dataset(dir);
  if (world().rank() == 0) flip_byte(dir / "ds/train-00001.tok", 64 + 3);
  world().barrier();
  try {
    stage_dataset(world(), dir / "ds", {.stage_dir = dir / "local"});
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("train-00001.tok"), HasSubstr("payload checksum")));
  }
}

TEST(Staging, StageDirectoryOnSomeRanksOnlyIsAUsageError) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks to disagree";
  SharedScratch dir("disagree");
  write_dataset(dir);
  StagingOptions opt;
  if (world().rank() == 1) opt.stage_dir = dir / "local";
  EXPECT_THROW(stage_dataset(world(), dir / "ds", opt), UsageError);
}

TEST(Staging, UnusableStageDirectoryFallsBack) {
  SharedScratch dir("unusable");
  write_dataset(dir);
  if (world().rank() == 0) write_file(dir / "a-file", "x");
  world().barrier();
  // A path through a regular file: mkdir fails (ENOTDIR), as a permission problem would.
  const StagingResult r = stage_dataset(world(), dir / "ds", {.stage_dir = dir / "a-file/stage"});
  EXPECT_EQ(r.outcome, StagingOutcome::FellBack);
  EXPECT_EQ(r.dir, dir / "ds");
  EXPECT_THAT(r.reason, AllOf(HasSubstr("a-file/stage"), HasSubstr("Not a directory")));
  EXPECT_EQ(samples(r.dir), samples(dir / "ds"));
}

// A relative staging directory (or blanks) is no node-local directory: refused on every rank, naming it, before any
// copy lands in the working directory.
TEST(Staging, ARelativeStageDirectoryIsAUsageError) {
  SharedScratch dir("relative");
  write_dataset(dir);
  for (const std::string bad : {"stage-relative", " "}) {
    try {
      stage_dataset(world(), dir / "ds", {.stage_dir = bad});
      ADD_FAILURE() << "'" << bad << "' was accepted as the staging directory";
    } catch (const UsageError& e) {
      EXPECT_THAT(e.what(),
                  AllOf(HasSubstr("'" + bad + "' is not an absolute path"), HasSubstr("TENAX_DATA_STAGE_DIR")));
    }
  }
  EXPECT_FALSE(stdfs::exists("stage-relative"));
}

// A tmpfs of `bytes` at `dir`, mounted by rank 0 (root only); unmounted whatever happens.
class Tmpfs {
 public:
  Tmpfs(const std::string& dir, std::uint64_t bytes, bool read_only) : dir_(dir) {
    std::string error;
    if (world().rank() == 0) {
      stdfs::create_directories(dir);
      const std::string options = "size=" + std::to_string(bytes);
      if (::mount("tmpfs", dir.c_str(), "tmpfs", read_only ? MS_RDONLY : 0, options.c_str()) == 0)
        mounted_ = true;
      else
        error = "mount -t tmpfs -o " + options + " tmpfs " + dir + ": " + std::strerror(errno);
    }
    error_ = broadcast_string(world(), error, 0);
  }
  ~Tmpfs() {
    world().barrier();
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string error_;
};

TEST(Staging, FullLocalDiskFallsBack) {
  SharedScratch dir("full");
  write_dataset(dir);  // about 47 KB
  Tmpfs disk(dir / "local", 64 * 1024, false);
  if (!disk.error().empty()) GTEST_SKIP() << "cannot mount a tmpfs (" << disk.error() << "): needs root";
  if (world().rank() == 0) write_file(dir / "local/filler", std::string(40 * 1024, 'x'));  // leaves < 24 KB free
  world().barrier();
  const StagingResult r = stage_dataset(world(), dir / "ds", {.stage_dir = dir / "local"});
  EXPECT_EQ(r.outcome, StagingOutcome::FellBack);
  EXPECT_EQ(r.dir, dir / "ds");
  EXPECT_THAT(r.reason, AllOf(HasSubstr("free"), HasSubstr("needs"), HasSubstr("TENAX_DATA_STAGE_DIR")));
  EXPECT_EQ(samples(r.dir), samples(dir / "ds"));
}

// A copier killed mid-copy (a job past its time limit) leaves a partial copy that no one else removes; on a small local
// disk it would make every later job fall back for want of space. The next copier of that dataset on the node removes
// it before it checks the free space (here the leftover leaves less free than the dataset needs).
TEST(Staging, AKilledCopiersPartialCopyIsRemovedBeforeTheFreeSpaceCheck) {
  SharedScratch dir("abandoned");
  write_dataset(dir);  // about 47 KB
  Tmpfs disk(dir / "local", 64 * 1024, false);
  if (!disk.error().empty()) GTEST_SKIP() << "cannot mount a tmpfs (" << disk.error() << "): needs root";
  std::string leftover, other, in_use;
  UniqueFd held;
  if (world().rank() == 0) {
    const pid_t gone = ::fork();
    if (gone == 0) ::_exit(0);
    ::waitpid(gone, nullptr, 0);
    const std::string key = data::staged_dir_name(data::read_index(dir / "ds").index_crc32c);
    leftover = dir / ("local/" + key + ".tmp-n-" + std::to_string(gone) + "-0");
    stdfs::create_directories(leftover);
    write_file(leftover + "/train-00000.tok", std::string(30 * 1024, 'x'));
    // Another dataset's (re-encoded since, its copy has another name) counts as well: together < 24 KB are free.
    other = dir / ("local/tenax-data-0badc0de.discard-n-" + std::to_string(gone) + "-3");
    stdfs::create_directories(other);
    write_file(other + "/train-00000.tok", std::string(10 * 1024, 'x'));
    // A living copier's folder stays, whatever its pid says (another pid namespace): it holds its lock.
    in_use = dir / ("local/" + key + ".tmp-n-" + std::to_string(gone) + "-9");
    stdfs::create_directories(in_use);
    held = detail::lock_sibling(in_use);
  }
  leftover = broadcast_string(world(), leftover, 0);
  other = broadcast_string(world(), other, 0);
  in_use = broadcast_string(world(), in_use, 0);
  const StagingResult r = stage_dataset(world(), dir / "ds", {.stage_dir = dir / "local", .node_name = "n"});
  EXPECT_EQ(r.outcome, StagingOutcome::Copied) << r.reason;
  EXPECT_FALSE(stdfs::exists(leftover));
  EXPECT_FALSE(stdfs::exists(other));
  EXPECT_TRUE(stdfs::exists(in_use));
  EXPECT_EQ(samples(r.dir), samples(dir / "ds"));
}

TEST(Staging, ReadOnlyLocalDiskFallsBack) {
  SharedScratch dir("readonly");
  write_dataset(dir);
  Tmpfs disk(dir / "local", 1 << 20, true);
  if (!disk.error().empty()) GTEST_SKIP() << "cannot mount a tmpfs (" << disk.error() << "): needs root";
  const StagingResult r = stage_dataset(world(), dir / "ds", {.stage_dir = dir / "local"});
  EXPECT_EQ(r.outcome, StagingOutcome::FellBack);
  EXPECT_THAT(r.reason, HasSubstr("Read-only file system"));
}

}  // namespace
}  // namespace tenax::test
