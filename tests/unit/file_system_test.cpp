// core/file_system: the one implementation of the file steps every part of tenax uses. What its callers rely on: a
// replacement is all or nothing (no temporary left behind, the old file intact when the replacement fails), and
// rename_no_replace never overwrites.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "core/file_system.hpp"
#include "core/unique_fd.hpp"

namespace tenax {
namespace {

class FileSystem : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tenax-fs-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string contents(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  }
  int entries() {
    int n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_))
      ++n;
    return n;
  }

  std::string dir_;
};

TEST_F(FileSystem, AReplacementLeavesOnlyTheNewFileWhateverTheDurability) {
  const std::string path = dir_ + "/state.json";
  for (fs::Durability d : {fs::Durability::None, fs::Durability::Contents, fs::Durability::ContentsAndName}) {
    const std::string text = "step " + std::to_string(static_cast<int>(d)) + "\n";
    fs::replace_file_atomically(path, text, d);
    EXPECT_EQ(contents(path), text);
    EXPECT_EQ(entries(), 1) << "a temporary was left behind";
  }
}

TEST_F(FileSystem, AFailedReplacementKeepsTheOldFileAndRemovesTheTemporary) {
  // The target is a non-empty directory: the temporary is written, then rename(2) fails (EISDIR).
  const std::string target = dir_ + "/taken";
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  fs::replace_file_atomically(target + "/keep", "old", fs::Durability::None);
  try {
    fs::replace_file_atomically(target, "new", fs::Durability::Contents);
    ADD_FAILURE() << "replacing a directory with a file succeeded";
  } catch (const fs::FsError& e) {
    EXPECT_NE(std::string(e.what()).find(target), std::string::npos) << e.what();
    EXPECT_EQ(e.error_number(), EISDIR) << e.what();
  }
  EXPECT_EQ(entries(), 1) << "the temporary was left behind";
  EXPECT_EQ(contents(target + "/keep"), "old");
  // A missing directory: nothing is created, and the error names the temporary's path.
  try {
    fs::replace_file_atomically(dir_ + "/missing/file", "x", fs::Durability::None);
    ADD_FAILURE() << "a file in a missing directory was written";
  } catch (const fs::FsError& e) {
    EXPECT_EQ(e.error_number(), ENOENT) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir_ + "/missing/file.tmp."), std::string::npos) << e.what();
  }
}

TEST_F(FileSystem, RenameNoReplaceNeverOverwrites) {
  const std::string a = dir_ + "/a", b = dir_ + "/b";
  fs::replace_file_atomically(a, "first", fs::Durability::None);
  EXPECT_TRUE(fs::rename_no_replace(a, b));
  fs::replace_file_atomically(a, "second", fs::Durability::None);
  EXPECT_FALSE(fs::rename_no_replace(a, b));
  EXPECT_EQ(contents(b), "first");
  EXPECT_EQ(contents(a), "second");
}

TEST_F(FileSystem, ReadExactSaysWhereAShortFileEnds) {
  const std::string path = dir_ + "/short";
  fs::replace_file_atomically(path, "0123456789", fs::Durability::None);
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  char buf[8] = {};
  fs::read_exact(fd, buf, 4, 3, path);
  EXPECT_EQ(std::string(buf, 4), "3456");
  try {
    fs::read_exact(fd, buf, 8, 6, path);
    ADD_FAILURE() << "a read past the end succeeded";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("ends early"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at byte 10"), std::string::npos) << e.what();
  }
  ::close(fd);
}

// UniqueFd (core/unique_fd.hpp): each descriptor closed exactly once, by whoever holds it last.
bool is_open(int fd) {
  return ::fcntl(fd, F_GETFD) != -1;
}

TEST(UniqueFd, ClosesWhatItHoldsOnceWhenMovedResetOrReleased) {
  int a = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int b = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  {
    UniqueFd first(a);
    UniqueFd moved(std::move(first));
    EXPECT_FALSE(first.valid());  // NOLINT(bugprone-use-after-move): a moved-from holder is empty by contract
    EXPECT_EQ(moved.get(), a);
    UniqueFd other(b);
    moved = std::move(other);  // closes a, takes b
    EXPECT_FALSE(is_open(a));
    EXPECT_TRUE(is_open(b));
    const int kept = moved.release();
    EXPECT_EQ(kept, b);
    EXPECT_FALSE(moved.valid());
  }
  EXPECT_TRUE(is_open(b));  // released: the holder going away left it open
  UniqueFd again(b);
  again.reset();
  EXPECT_FALSE(is_open(b));
  EXPECT_FALSE(again.valid());
}

TEST(UniqueFd, AFailedOpenKeepsItsErrno) {
  errno = 0;
  const UniqueFd fd(::open("/nonexistent-tenax-test-dir/file", O_RDONLY | O_CLOEXEC));
  EXPECT_FALSE(fd.valid());
  EXPECT_EQ(errno, ENOENT);
}

}  // namespace
}  // namespace tenax
