// Removal of a finished job's node-local copies (checkpoint/local_tier_cleanup.hpp): exactly the job's tier folders
// go; other jobs' folders, unmarked folders, other names and whatever a symbolic link points to stay.
#include "checkpoint/local_tier_cleanup.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/unique_fd.hpp"

namespace {

namespace stdfs = std::filesystem;
using tenax::ckpt::remove_job_local_copies;

class LocalTierCleanup : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (stdfs::temp_directory_path() / "tenax-cleanup-XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    root_ = templ;
    local_ = root_ / "local";
    outside_ = root_ / "outside";
    stdfs::create_directories(local_);
    stdfs::create_directories(outside_);
  }
  void TearDown() override { stdfs::remove_all(root_); }

  static void write(const stdfs::path& file, const std::string& text) {
    stdfs::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }
  // A tier folder as the runtime leaves it: the job-id file and one rank's step.
  stdfs::path tier(const std::string& key, const std::string& job) {
    const stdfs::path folder = local_ / ("tenax-" + key);
    write(folder / "rank_0" / "step_10" / "rank_0.h5", std::string(1000, 'x'));
    write(folder / "rank_0" / "step_10" / "manifest.json", "{}");
    if (!job.empty()) write(folder / "job-id", job + "\n");
    return folder;
  }

  stdfs::path root_, local_, outside_;
};

TEST_F(LocalTierCleanup, RemovesExactlyTheJobsFolders) {
  const auto mine = tier("00000000000000aa", "4242");
  const auto mine_too = tier("00000000000000bb", "4242");
  const auto other_job = tier("00000000000000cc", "4243");
  const auto prefix_job = tier("00000000000000dd", "42");  // a prefix of the id is another job
  const auto unmarked = tier("00000000000000ee", "");
  write(local_ / "tenax-notakey" / "job-id", "4242\n");  // not a tier folder's name
  write(local_ / "notes.txt", "4242\n");

  const auto report = remove_job_local_copies(local_.string(), "4242");
  EXPECT_TRUE(report.errors.empty()) << report.errors.front();
  EXPECT_EQ(report.removed, 2);
  EXPECT_EQ(report.kept, 3);
  EXPECT_EQ(report.bytes, 2u * (1000 + 2 + 5));
  EXPECT_FALSE(stdfs::exists(mine));
  EXPECT_FALSE(stdfs::exists(mine_too));
  EXPECT_TRUE(stdfs::exists(other_job / "rank_0" / "step_10" / "rank_0.h5"));
  EXPECT_TRUE(stdfs::exists(prefix_job / "rank_0" / "step_10" / "rank_0.h5"));
  EXPECT_TRUE(stdfs::exists(unmarked / "rank_0" / "step_10" / "rank_0.h5"));
  EXPECT_TRUE(stdfs::exists(local_ / "tenax-notakey" / "job-id"));
  EXPECT_TRUE(stdfs::exists(local_ / "notes.txt"));

  // Nothing of the job is left: a second pass removes nothing and complains about nothing.
  const auto again = remove_job_local_copies(local_.string(), "4242");
  EXPECT_EQ(again.removed, 0);
  EXPECT_TRUE(again.errors.empty());
}

// A component of a heterogeneous job: its copies may name its own id or the leader's.
TEST_F(LocalTierCleanup, AJobKnownBySeveralIdsLosesTheFoldersOfEach) {
  const auto own = tier("00000000000000aa", "4243");
  const auto leader = tier("00000000000000bb", "4242");
  const auto next_component = tier("00000000000000cc", "4244");
  const auto report = remove_job_local_copies(local_.string(), std::vector<std::string>{"4243", "4242"});
  EXPECT_TRUE(report.errors.empty()) << report.errors.front();
  EXPECT_EQ(report.removed, 2);
  EXPECT_EQ(report.kept, 1);
  EXPECT_FALSE(stdfs::exists(own));
  EXPECT_FALSE(stdfs::exists(leader));
  EXPECT_TRUE(stdfs::exists(next_component / "rank_0" / "step_10" / "rank_0.h5"));
  // No id, or one id that is not an id, removes nothing.
  const auto survivor = tier("00000000000000dd", "4242");
  EXPECT_EQ(remove_job_local_copies(local_.string(), std::vector<std::string>{}).errors.size(), 1u);
  EXPECT_EQ(remove_job_local_copies(local_.string(), std::vector<std::string>{"4242", ""}).errors.size(), 1u);
  EXPECT_TRUE(stdfs::exists(survivor / "rank_0" / "step_10" / "rank_0.h5"));
}

TEST_F(LocalTierCleanup, NeverFollowsSymbolicLinks) {
  write(outside_ / "precious" / "data.bin", "keep me");
  write(outside_ / "victim" / "job-id", "4242\n");
  write(outside_ / "victim" / "data.bin", "keep me too");
  // A link inside the job's folder to a directory elsewhere: the link goes, the directory's files stay.
  const auto mine = tier("00000000000000aa", "4242");
  stdfs::create_directory_symlink(outside_ / "precious", mine / "rank_0" / "escape");
  stdfs::create_symlink(outside_ / "precious" / "data.bin", mine / "rank_0" / "file-link");
  // A link with a tier folder's name to a directory that looks like the job's: not the job's folder.
  stdfs::create_directory_symlink(outside_ / "victim", local_ / "tenax-00000000000000ff");
  // A job-id that is a link to a file naming the job: not trusted.
  const auto linked_id = tier("00000000000000bb", "");
  stdfs::create_symlink(outside_ / "victim" / "job-id", linked_id / "job-id");

  const auto report = remove_job_local_copies(local_.string(), "4242");
  EXPECT_EQ(report.removed, 1);
  EXPECT_FALSE(stdfs::exists(stdfs::symlink_status(mine)));
  EXPECT_TRUE(stdfs::exists(outside_ / "precious" / "data.bin"));
  EXPECT_TRUE(stdfs::exists(outside_ / "victim" / "data.bin"));
  EXPECT_TRUE(stdfs::is_symlink(local_ / "tenax-00000000000000ff"));
  EXPECT_TRUE(stdfs::exists(linked_id / "rank_0" / "step_10" / "rank_0.h5"));
}

TEST_F(LocalTierCleanup, ReportsWhatItCannotRemoveAndNeverThrows) {
  // A tree deeper than the tier ever writes is left in place, with the reason.
  const auto mine = tier("00000000000000aa", "4242");
  stdfs::path deep = mine;
  for (int i = 0; i < 20; ++i)
    deep /= "d";
  write(deep / "file", "x");
  const auto report = remove_job_local_copies(local_.string(), "4242");
  EXPECT_EQ(report.removed, 0);
  ASSERT_EQ(report.errors.size(), 1u);
  EXPECT_NE(report.errors[0].find("deeper than 16 levels"), std::string::npos) << report.errors[0];
  EXPECT_TRUE(stdfs::exists(deep / "file"));

  // A directory that does not exist: the job never wrote there, nothing to report.
  const auto missing = remove_job_local_copies((root_ / "never").string(), "4242");
  EXPECT_EQ(missing.removed, 0);
  EXPECT_TRUE(missing.errors.empty());

  // A file where the directory should be, an empty and an oversized job id: reported, nothing removed.
  write(root_ / "a-file", "");
  EXPECT_EQ(remove_job_local_copies((root_ / "a-file").string(), "4242").errors.size(), 1u);
  EXPECT_EQ(remove_job_local_copies(local_.string(), "").errors.size(), 1u);
  EXPECT_EQ(remove_job_local_copies(local_.string(), std::string(65, '7')).errors.size(), 1u);
  EXPECT_TRUE(stdfs::exists(mine / "job-id"));
}

// Two components of a heterogeneous job on one node: the first to end must not remove the folder the other still
// uses (its copies name the leader's id too). A living process holds it (here a child, as a rank would); once that
// process is gone the same removal takes it.
TEST_F(LocalTierCleanup, AFolderALivingProcessHoldsIsLeftUntilThatProcessEnds) {
  const auto held = tier("00000000000000aa", "4242");
  const auto free = tier("00000000000000bb", "4242");
  // A child holding `held` until the parent closes its end of `release`; reaped on every way out of the test.
  struct Holder {
    int locked[2] = {-1, -1}, release[2] = {-1, -1};
    pid_t pid = -1;
    void let_go() {
      if (release[1] >= 0) ::close(std::exchange(release[1], -1));
      if (pid > 0) ::waitpid(std::exchange(pid, -1), nullptr, 0);
    }
    ~Holder() {
      let_go();
      for (int fd : {locked[0], locked[1], release[0]})
        if (fd >= 0) ::close(fd);
    }
  } holder;
  ASSERT_EQ(::pipe(holder.locked), 0);
  ASSERT_EQ(::pipe(holder.release), 0);
  holder.pid = ::fork();
  ASSERT_GE(holder.pid, 0);
  if (holder.pid == 0) {
    const char ok = tenax::ckpt::hold_local_tier_folder(held.string()) >= 0 ? '1' : '0';
    if (::write(holder.locked[1], &ok, 1) != 1) ::_exit(2);
    ::close(holder.release[1]);
    char byte;
    while (::read(holder.release[0], &byte, 1) > 0) {  // until the parent closes its end
    }
    ::_exit(0);  // the lock goes with the process
  }
  ::close(std::exchange(holder.release[0], -1));
  char ok = 0;
  ASSERT_EQ(::read(holder.locked[0], &ok, 1), 1);
  ASSERT_EQ(ok, '1') << "the child could not take the folder's lock";

  const auto report = remove_job_local_copies(local_.string(), "4242");
  EXPECT_TRUE(report.errors.empty()) << report.errors.front();
  EXPECT_EQ(report.removed, 1);
  ASSERT_EQ(report.in_use.size(), 1u);
  EXPECT_EQ(report.in_use[0], held.string());
  EXPECT_FALSE(stdfs::exists(free));
  EXPECT_TRUE(stdfs::exists(held / "rank_0" / "step_10" / "rank_0.h5"));
  EXPECT_TRUE(stdfs::exists(held / "job-id"));

  holder.let_go();
  const auto after = remove_job_local_copies(local_.string(), "4242");
  EXPECT_TRUE(after.errors.empty()) << after.errors.front();
  EXPECT_EQ(after.removed, 1);
  EXPECT_TRUE(after.in_use.empty());
  EXPECT_FALSE(stdfs::exists(held));
}

// Holding a folder makes it (its parent must exist) and an in-use file only its user may open, so that another user
// cannot keep the copies from being removed; a file an older version left readable to all is narrowed.
TEST_F(LocalTierCleanup, HoldingMakesTheFolderAndAnInUseFileOnlyItsUserMayOpen) {
  const stdfs::path folder = local_ / "tenax-00000000000000aa";
  const int fd = tenax::ckpt::hold_local_tier_folder(folder.string());
  ASSERT_GE(fd, 0) << std::strerror(errno);
  EXPECT_EQ(stdfs::status(folder).permissions(), stdfs::perms::owner_all);
  EXPECT_EQ(stdfs::status(folder / "in-use").permissions(), stdfs::perms::owner_read | stdfs::perms::owner_write);
  ::close(fd);
  stdfs::permissions(folder / "in-use", stdfs::perms::others_read | stdfs::perms::group_read, stdfs::perm_options::add);
  const int again = tenax::ckpt::hold_local_tier_folder(folder.string());
  ASSERT_GE(again, 0) << std::strerror(errno);
  EXPECT_EQ(stdfs::status(folder / "in-use").permissions(), stdfs::perms::owner_read | stdfs::perms::owner_write);
  ::close(again);
  EXPECT_EQ(tenax::ckpt::hold_local_tier_folder((root_ / "no-parent" / "tenax-00000000000000aa").string()), -1);
}

// The in-use file is the user's: a link planted in its place is neither followed nor taken for a holder.
TEST_F(LocalTierCleanup, AnInUseLinkIsNoHolder) {
  const int holder = tenax::ckpt::hold_local_tier_folder(outside_.string());  // the link's target, held
  ASSERT_GE(holder, 0);
  const auto mine = tier("00000000000000aa", "4242");
  stdfs::create_symlink(outside_ / "in-use", mine / "in-use");
  const auto report = remove_job_local_copies(local_.string(), "4242");
  EXPECT_TRUE(report.errors.empty()) << report.errors.front();
  EXPECT_EQ(report.removed, 1);
  EXPECT_TRUE(report.in_use.empty());
  EXPECT_FALSE(stdfs::exists(stdfs::symlink_status(mine)));
  EXPECT_TRUE(stdfs::exists(outside_ / "in-use"));
  ::close(holder);
}

// A reader holds only its own job's folder, and only what is there: no folder or in-use file is made, another job's
// folder (or one naming none) is left to that job's end, a link in the folder's or the file's place is not followed,
// a directory in the file's place is refused, and a removal under way is not waited for.
TEST_F(LocalTierCleanup, AReaderHoldsAnExistingFolderOfItsJobOnly) {
  using tenax::UniqueFd;
  using tenax::ckpt::hold_existing_local_tier_folder;
  const stdfs::path missing = local_ / "tenax-00000000000000ab";
  errno = 0;
  EXPECT_EQ(hold_existing_local_tier_folder(missing.string(), "4242"), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_FALSE(stdfs::exists(missing));
  const auto unmarked = tier("00000000000000ac", "4243");  // a folder without an in-use file
  errno = 0;
  EXPECT_EQ(hold_existing_local_tier_folder(unmarked.string(), "4243"), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_FALSE(stdfs::exists(unmarked / "in-use"));
  {
    const UniqueFd target(tenax::ckpt::hold_local_tier_folder(outside_.string()));
    ASSERT_GE(target.get(), 0);
    const auto linked = tier("00000000000000ad", "4243");
    stdfs::create_symlink(outside_ / "in-use", linked / "in-use");
    errno = 0;
    EXPECT_EQ(hold_existing_local_tier_folder(linked.string(), "4243"), -1);
    EXPECT_EQ(errno, ELOOP);
  }
  const auto odd = tier("00000000000000ae", "4243");
  stdfs::create_directory(odd / "in-use");
  errno = 0;
  EXPECT_EQ(hold_existing_local_tier_folder(odd.string(), "4243"), -1);
  EXPECT_EQ(errno, EINVAL);

  const stdfs::path held = local_ / "tenax-00000000000000af";
  ::close(tenax::ckpt::hold_local_tier_folder(held.string()));  // as a writer leaves it
  errno = 0;
  EXPECT_EQ(hold_existing_local_tier_folder(held.string(), "4242"), -1) << "a folder naming no job";
  EXPECT_EQ(errno, EPERM);
  write(held / "job-id", "4242\n");
  EXPECT_EQ(tenax::ckpt::local_tier_folder_job(held.string()), "4242");
  errno = 0;
  EXPECT_EQ(hold_existing_local_tier_folder(held.string(), "4241"), -1) << "another job's folder";
  EXPECT_EQ(errno, EPERM);
  errno = 0;
  EXPECT_EQ(hold_existing_local_tier_folder(held.string(), ""), -1) << "no job";
  EXPECT_EQ(errno, EPERM);
  // A link in the folder's place, to the job's own folder, is not followed.
  const stdfs::path link = local_ / "tenax-00000000000000b0";
  stdfs::create_directory_symlink(held, link);
  EXPECT_EQ(hold_existing_local_tier_folder(link.string(), "4242"), -1);
  EXPECT_TRUE(errno == ELOOP || errno == ENOTDIR) << std::strerror(errno);
  EXPECT_EQ(tenax::ckpt::local_tier_folder_job(link.string()), "");
  stdfs::remove(link);
  {
    const UniqueFd removal(::open((held / "in-use").c_str(), O_RDWR | O_CLOEXEC));  // as a removal holds it
    ASSERT_GE(removal.get(), 0);
    ASSERT_EQ(::flock(removal.get(), LOCK_EX | LOCK_NB), 0);
    errno = 0;
    EXPECT_EQ(hold_existing_local_tier_folder(held.string(), "4242"), -1);
    EXPECT_EQ(errno, EWOULDBLOCK);
  }
  UniqueFd reader(hold_existing_local_tier_folder(held.string(), "4242"));
  ASSERT_GE(reader.get(), 0) << std::strerror(errno);
  {
    const UniqueFd second(hold_existing_local_tier_folder(held.string(), "4242"));  // readers share it
    ASSERT_GE(second.get(), 0) << std::strerror(errno);
  }
  auto report = remove_job_local_copies(local_.string(), "4242");
  EXPECT_TRUE(report.errors.empty()) << report.errors.front();
  EXPECT_EQ(report.in_use, std::vector<std::string>{held.string()});
  EXPECT_TRUE(stdfs::exists(held / "in-use"));
  reader.reset();
  report = remove_job_local_copies(local_.string(), "4242");
  EXPECT_TRUE(report.errors.empty()) << report.errors.front();
  EXPECT_EQ(report.removed, 1);
  EXPECT_FALSE(stdfs::exists(held));
  EXPECT_EQ(tenax::ckpt::local_tier_folder_job(held.string()), "");
}

TEST(LocalTierPaths, ExpandsTheNodeName) {
  EXPECT_EQ(tenax::ckpt::expand_node("/dev/shm/%n/ckpt-%n", "n7"), "/dev/shm/n7/ckpt-n7");
  EXPECT_EQ(tenax::ckpt::expand_node("/dev/shm/x%", "n7"), "/dev/shm/x%");
  EXPECT_TRUE(tenax::ckpt::is_local_tier_folder("tenax-0123456789abcdef"));
  EXPECT_FALSE(tenax::ckpt::is_local_tier_folder("tenax-0123456789ABCDEF"));
  EXPECT_FALSE(tenax::ckpt::is_local_tier_folder("tenax-0123456789abcde"));
  EXPECT_FALSE(tenax::ckpt::is_local_tier_folder("other-0123456789abcdef"));
}

}  // namespace
