// The training example under tenax-launch against storage that cannot hold its checkpoints: a directory it cannot
// write is a usage error before any training (exit 64, never retried), and a full disk makes a periodic checkpoint
// fail without ending the run, until --max-checkpoint-failures failures in a row stop it with the I/O error.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "launch_harness.hpp"

namespace tenax::test {
namespace {

using std::chrono::seconds;

const std::vector<std::string> kModel = {"--vocab",   "64", "--hidden", "32", "--layers",      "2",
                                         "--seq-len", "8",  "--batch",  "8",  "--micro-batch", "2"};

std::vector<std::string> launcher_args(const ScratchDir& dir, const std::string& checkpoint_dir) {
  return {"-n",        "2",     "--run-dir",      dir / "run", "--checkpoint-dir",     checkpoint_dir,
          "--backoff", "100ms", "--max-restarts", "0",         "--heartbeat-interval", "20ms"};
}

std::vector<std::string> with_model(std::vector<std::string> args) {
  args.insert(args.end(), kModel.begin(), kModel.end());
  return args;
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// A small tmpfs at `path`, unmounted by the destructor; error() says why it could not be mounted.
class Tmpfs {
 public:
  Tmpfs(const std::string& path, const char* options, unsigned long flags = 0) : path_(path) {
    if (::mkdir(path.c_str(), 0755) != 0 || ::mount("tmpfs", path.c_str(), "tmpfs", flags, options) != 0)
      error_ = std::strerror(errno);
  }
  ~Tmpfs() {
    if (error_.empty()) ::umount2(path_.c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }

 private:
  std::string path_;
  std::string error_;
};

TEST(ExampleCheckpointStorage, AReadOnlyDirectoryStopsTheRunAtStartUpAsAUsageError) {
  ScratchDir dir("readonly");
  Tmpfs ro(dir / "ro", "size=1m", MS_RDONLY);
  if (!ro.error().empty()) GTEST_SKIP() << "cannot mount a read-only tmpfs here (needs root): " << ro.error();
  Launch launch(launcher_args(dir, dir / "ro"), with_model({"--steps", "20"}), dir / "out.txt");
  EXPECT_EQ(launch.wait(seconds(60)), 64) << launch.output();
  const std::string output = launch.output();
  // tenax-launch finds it first (it locks the directory before starting anything); without the launcher the program
  // refuses it at start-up the same way (CheckpointFaults' read-only case).
  EXPECT_TRUE(has(output, "--checkpoint-dir '" + dir / "ro" + "' is not writable")) << output;
  EXPECT_TRUE(has(output, "Read-only file system")) << output;
  EXPECT_FALSE(has(output, "step 1 loss")) << "no training before the directory is known to work";
  EXPECT_EQ(ledger_lines(dir / "run", "attempt").size(), 0u) << "nothing may start";
}

TEST(ExampleCheckpointStorage, AFullDiskIsSurvivedUntilTooManySavesInARowFail) {
  ScratchDir dir("fulldisk");
  const std::string mnt = dir / "fs";
  Tmpfs fs(mnt, "size=4m");
  if (!fs.error().empty()) GTEST_SKIP() << "cannot mount a small tmpfs here (needs root): " << fs.error();
  // Full but for 16 KiB: enough for the start-up probe, far too little for a checkpoint of this model.
  {
    const int fd = ::open((mnt + "/filler").c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    std::vector<char> block(1 << 16, 'x');
    std::size_t chunk = block.size();
    off_t size = 0;
    while (chunk > 0) {
      const ssize_t n = ::write(fd, block.data(), chunk);
      if (n > 0)
        size += n;
      else
        chunk /= 2;
    }
    ASSERT_EQ(::ftruncate(fd, size - (16 << 10)), 0);
    ::close(fd);
  }
  Launch launch(launcher_args(dir, mnt + "/ckpt"),
                with_model({"--steps", "40", "--checkpoint-every", "2", "--max-checkpoint-failures", "3"}),
                dir / "out.txt");
  const int code = launch.wait(seconds(90));
  const std::string output = launch.output();
  EXPECT_NE(code, 0) << output;
  EXPECT_NE(code, 64) << "a full disk is not a usage error:\n" << output;
  // The first two failures are warnings and training goes on past them.
  EXPECT_TRUE(has(output, "a checkpoint failed; training goes on")) << output;
  EXPECT_TRUE(has(output, "(1 of 3 failures in a row allowed)")) << output;
  EXPECT_TRUE(has(output, "(2 of 3 failures in a row allowed)")) << output;
  EXPECT_TRUE(has(output, "step 5 loss")) << output;
  EXPECT_TRUE(has(output, "3 checkpoint saves in a row failed (max_failures 3)")) << output;
  EXPECT_TRUE(has(output, "No space left on device")) << output;
  EXPECT_FALSE(has(output, "step 40 loss")) << "the run must stop, not train on without checkpoints";
}

}  // namespace
}  // namespace tenax::test
