// A save interrupted by SIGKILL (every rank killed while its shard file is being written) leaves the previous
// checkpoint loadable and intact; the next run removes the leftover step_<N>.tmp directory. A second run started on
// the directory while the first still saves there is refused and removes nothing.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::FILE* out = std::freopen(log.c_str(), "w", stdout);
    if (out) ::dup2(::fileno(stdout), 2);
    std::vector<char*> argv;
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

std::vector<std::string> mpirun(int ranks, const std::string& mode, const std::string& dir) {
  return {TENAX_MPIEXEC, "-n", std::to_string(ranks), TENAX_CRASH_TRAINER, mode, dir};
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A rank file of an unfinished checkpoint that already holds data: the ranks are mid-write.
bool writing_now(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 4 || name.substr(name.size() - 4) != ".tmp" || name == "latest.tmp") continue;
    for (const auto& file : fs::directory_iterator(entry.path(), ec))
      if (fs::file_size(file.path(), ec) > (1u << 20)) return true;
  }
  return false;
}

// Waits until `ready()` holds (true), or two minutes pass (false), woken by the kernel's reports of files created,
// renamed or written under `root` (its folders two levels down: the checkpoint directory and the step folders being
// written in it). The poll's timeout only bounds a wait on a report that never comes.
bool wait_on_files(const fs::path& root, const std::function<bool()>& ready) {
  const int watch = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (watch < 0) return ready();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  constexpr std::uint32_t kEvents = IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_CLOSE_WRITE;
  bool held = false;
  while (!held && std::chrono::steady_clock::now() < deadline) {
    // Folders appear as the run goes: watch each (watching one again changes nothing).
    std::error_code error;
    ::inotify_add_watch(watch, root.c_str(), kEvents);
    for (const auto& entry : fs::directory_iterator(root, error))
      if (entry.is_directory(error)) {
        ::inotify_add_watch(watch, entry.path().c_str(), kEvents);
        for (const auto& inner : fs::directory_iterator(entry.path(), error))
          if (inner.is_directory(error)) ::inotify_add_watch(watch, inner.path().c_str(), kEvents);
      }
    held = ready();
    if (held) break;
    pollfd readable{watch, POLLIN, 0};
    ::poll(&readable, 1, 1000);
    alignas(inotify_event) char events[4096];
    while (::read(watch, events, sizeof events) > 0) {
    }
  }
  ::close(watch);
  return held;
}

TEST(CheckpointKill, SigkillMidWriteLeavesThePreviousCheckpointLoadable) {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  ::setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  ::setenv("OMPI_MCA_hwloc_base_binding_policy", "none", 1);
  ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
  char templ[] = "/tmp/tenax-ckpt-kill-XXXXXX";
  ASSERT_NE(::mkdtemp(templ), nullptr);
  const fs::path root = templ;
  fs::create_directories(root / "pids");
  const std::string dir = (root / "ckpt").string();

  for (int round = 0; round < 3; ++round) {
    const std::string log = (root / ("save" + std::to_string(round) + ".log")).string();
    fs::remove_all(root / "pids");
    fs::create_directories(root / "pids");
    pid_t job = spawn(mpirun(2, "save-forever", dir), log);
    // Let at least one checkpoint commit, then catch the ranks in the middle of writing the next.
    const bool caught = wait_on_files(root, [&] {
      return fs::exists(fs::path(dir) / "latest") && writing_now(dir) && fs::exists(root / "pids/rank_1");
    });
    int killed = 0;
    for (int r = 0; r < 2; ++r) {
      std::string pid = slurp((root / ("pids/rank_" + std::to_string(r))).string());
      if (!pid.empty() && ::kill(std::stoi(pid), SIGKILL) == 0) ++killed;
    }
    int status = 0;
    ::waitpid(job, &status, 0);
    ASSERT_TRUE(caught) << "the save loop never reached a write in progress; log:\n" << slurp(log);
    ASSERT_EQ(killed, 2);
    EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "mpirun should report the killed ranks";

    const std::string latest = slurp(dir + "/latest");
    const std::string vlog = (root / ("verify" + std::to_string(round) + ".log")).string();
    pid_t verify = spawn(mpirun(2, "verify", dir), vlog);
    ::waitpid(verify, &status, 0);
    const std::string out = slurp(vlog);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
    EXPECT_NE(out.find("loaded step"), std::string::npos) << out;
    // The loaded checkpoint is the one `latest` named when the ranks died (or a newer complete one).
    const std::string loaded =
        "step_" + out.substr(out.find("loaded step ") + 12,
                             out.find('\n', out.find("loaded step ")) - out.find("loaded step ") - 12);
    EXPECT_GE(std::stoull(loaded.substr(5)), std::stoull(latest.substr(5))) << out << " latest was " << latest;
    bool leftovers = false;
    for (const auto& entry : fs::directory_iterator(dir))
      leftovers = leftovers || entry.path().extension() == ".tmp";
    EXPECT_FALSE(leftovers) << "the verify run's checkpointer removes the interrupted step_<N>.tmp";
  }
  fs::remove_all(root);
}

// Two programs started with plain mpirun (no tenax-launch) on one checkpoint directory: the second one's start used to
// remove the first one's save under way as a leftover of an interrupted checkpoint (and its retention would have
// removed the first one's checkpoints). The first run's rank 0 holds the directory's lock: the second is refused,
// naming the first, and touches nothing; the first goes on saving.
TEST(CheckpointKill, ASecondRunOnTheSameDirectoryIsRefusedAndLeavesTheFirstRunsSaveAlone) {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  ::setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  ::setenv("OMPI_MCA_hwloc_base_binding_policy", "none", 1);
  ::unsetenv("TENAX_LAUNCHER");
  char templ[] = "/tmp/tenax-ckpt-two-runs-XXXXXX";
  ASSERT_NE(::mkdtemp(templ), nullptr);
  const fs::path root = templ;
  fs::create_directories(root / "pids");
  const std::string dir = (root / "ckpt").string();

  const pid_t first = spawn(mpirun(2, "save-forever", dir), (root / "first.log").string());
  // Catch the first run in the middle of a save and freeze its ranks there, so that its unfinished step stays put.
  const bool caught = wait_on_files(root, [&] {
    return fs::exists(fs::path(dir) / "latest") && writing_now(dir) && fs::exists(root / "pids/rank_1");
  });
  std::vector<pid_t> ranks;
  for (int r = 0; r < 2; ++r) {
    const std::string pid = slurp((root / ("pids/rank_" + std::to_string(r))).string());
    if (!pid.empty()) ranks.push_back(std::stoi(pid));
  }
  for (const pid_t rank : ranks)
    ::kill(rank, SIGSTOP);
  std::vector<std::string> unfinished;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".tmp" && entry.path().filename() != "latest.tmp")
      unfinished.push_back(entry.path().string());
  const std::string latest_before = slurp(dir + "/latest");

  int status = 0;
  const std::string second_log = (root / "second.log").string();
  const pid_t second = spawn(mpirun(2, "verify", dir), second_log);
  ::waitpid(second, &status, 0);
  const std::string out = slurp(second_log);
  bool still_there = !unfinished.empty();
  for (const auto& path : unfinished)
    still_there = still_there && fs::exists(path);

  // The first run goes on: it commits a newer step than the one it was frozen after.
  for (const pid_t rank : ranks)
    ::kill(rank, SIGCONT);
  const bool went_on = wait_on_files(root, [&] { return slurp(dir + "/latest") != latest_before; });
  for (const pid_t rank : ranks)
    ::kill(rank, SIGKILL);
  int first_status = 0;
  ::waitpid(first, &first_status, 0);

  ASSERT_TRUE(caught) << "the first run never reached a write in progress; log:\n"
                      << slurp((root / "first.log").string());
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the second run must be refused:\n" << out;
  EXPECT_NE(out.find("the checkpoint directory '" + dir + "' is in use by a training program (its rank 0: pid " +
                     std::to_string(ranks[0]) + " on host "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("give each run a checkpoint directory of its own"), std::string::npos) << out;
  EXPECT_TRUE(still_there) << "the first run's unfinished save was removed by the second run:\n" << out;
  EXPECT_TRUE(went_on) << "the first run did not commit again after the second was refused";

  // The first run's lock went with its ranks (SIGKILL): the directory is free again, and what it saved loads.
  const std::string verify_log = (root / "verify.log").string();
  const pid_t verify = spawn(mpirun(2, "verify", dir), verify_log);
  ::waitpid(verify, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << slurp(verify_log);
  fs::remove_all(root);
}

// ENOSPC inside HDF5 itself: HDF5 1.10 keeps a file whose H5Fclose (or H5Fcreate) failed in its ID table and closes
// it again at exit, which crashed the process with SIGSEGV (reported by tenax-launch as a crash, with no I/O error in
// sight). The rank must end with the I/O error's exit code and message instead. `free_bytes` left on the file system
// decides where the disk runs full: 0 in H5Fcreate (the superblock), a few KiB in H5Fclose (the metadata).
void expect_io_error_exit_on_full_disk(std::uint64_t free_bytes, const std::string& failing_call) {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  char templ[] = "/tmp/tenax-ckpt-enospc-XXXXXX";
  ASSERT_NE(::mkdtemp(templ), nullptr);
  const fs::path root = templ;
  const fs::path mnt = root / "fs";
  fs::create_directories(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=1m") != 0) {
    const std::string why = std::strerror(errno);
    fs::remove_all(root);
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root or CAP_SYS_ADMIN): " << why;
  }
  const std::string log = (root / "run.log").string();
  std::vector<std::string> args = mpirun(1, "save-on-full-disk", (mnt / "ckpt").string());
  args.push_back(std::to_string(free_bytes));
  pid_t job = spawn(args, log);
  int status = 0;
  ::waitpid(job, &status, 0);
  const std::string out = slurp(log);
  ::umount2(mnt.c_str(), MNT_DETACH);
  fs::remove_all(root);
  EXPECT_EQ(out.find("SIGSEGV"), std::string::npos) << out;
  EXPECT_EQ(out.find("Segmentation fault"), std::string::npos) << out;
  EXPECT_EQ(out.find("infinite loop closing library"), std::string::npos) << out;
  EXPECT_NE(out.find("No space left on device"), std::string::npos) << out;
  EXPECT_NE(out.find(failing_call + " failed"), std::string::npos) << "where the disk ran full:\n" << out;
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 1) << "an I/O error's exit code (kExitCrash):\n" << out;
}

TEST(CheckpointKill, FullDiskInsideTheFileCloseEndsWithTheIoErrorNotACrash) {
  expect_io_error_exit_on_full_disk(8192, "H5Fclose");
}

TEST(CheckpointKill, FullDiskInsideTheFileCreateEndsWithTheIoErrorNotACrash) {
  expect_io_error_exit_on_full_disk(0, "H5Fcreate");
}

}  // namespace
