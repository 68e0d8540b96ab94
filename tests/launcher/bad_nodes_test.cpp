#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "bad_nodes.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

class BadNodesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(TENAX_LAUNCH_TEST_TMP) + "/bad-nodes-" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = dir_ + "/bad-nodes.txt";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_, path_;
};

TEST_F(BadNodesTest, CrashesAddStrikesAndALostNodeIsExcludedAtOnce) {
  BadNodes nodes(path_);
  EXPECT_FALSE(nodes.blame("n1", "crash: rank 3 killed by SIGSEGV", false, 2));
  EXPECT_EQ(nodes.strikes("n1"), 1);
  EXPECT_TRUE(nodes.excluded().empty());
  EXPECT_TRUE(nodes.blame("n1", "hang: rank 3 silent", false, 2));
  EXPECT_TRUE(nodes.blame("n4", "node-lost", true, 2));
  EXPECT_EQ(nodes.excluded(), (std::set<std::string>{"n1", "n4"}));
  EXPECT_FALSE(nodes.blame("n4", "again", true, 2)) << "already excluded";
}

TEST_F(BadNodesTest, TheListSurvivesARestartOfTheLauncher) {
  {
    BadNodes nodes(path_);
    nodes.blame("n2", "node-lost: Node failure on n2", true, 3);
    nodes.blame("n3", "crash\twith a tab", false, 3);
  }
  BadNodes reloaded(path_);
  EXPECT_EQ(reloaded.excluded(), (std::set<std::string>{"n2"}));
  EXPECT_EQ(reloaded.strikes("n3"), 1);
  EXPECT_EQ(reloaded.strikes("n9"), 0);
  std::ifstream in(path_);
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header[0], '#');
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
}

TEST_F(BadNodesTest, ADamagedFileIsReportedWithItsLine) {
  std::ofstream(path_) << "# comment\nn1\t1\t1\tok\nn2 has no tabs\n";
  try {
    BadNodes nodes(path_);
    FAIL() << "expected IoError";
  } catch (const IoError& error) {
    EXPECT_NE(std::string(error.what()).find("line 3"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace tenax::launch
