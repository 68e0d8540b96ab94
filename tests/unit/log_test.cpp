#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <latch>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/scoped_env.hpp"
#include "tenax/log.hpp"

namespace tenax {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class LogToFile : public ::testing::Test {
 protected:
  void SetUp() override {
    // A directory of this test's own (mkdtemp): never one a stale or parallel run also uses.
    std::string pattern = (std::filesystem::temp_directory_path() / "tenax-log-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << pattern;
    dir_ = pattern;
    setenv("TENAX_LOG_FILE", (dir_ / "log-%h-%p-%r.txt").c_str(), 1);
    log::set_rank(3);
  }
  void TearDown() override {
    unsetenv("TENAX_LOG_FILE");
    unsetenv("TENAX_LOG_LEVEL");
    unsetenv("TENAX_LOG_SUBSYS");
    log::configure();
    std::filesystem::remove_all(dir_);
  }
  std::string only_file() {
    for (const auto& entry : std::filesystem::directory_iterator(dir_))
      return entry.path();
    return "";
  }
  std::filesystem::path dir_;
};

TEST_F(LogToFile, PathPatternAndPrefix) {
  setenv("TENAX_LOG_LEVEL", "info", 1);
  log::configure();
  TENAX_LOG(Info, "comm") << "hello " << 42;
  const std::string path = only_file();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string expected_name = "log-" + std::string(host) + "-" + std::to_string(getpid()) + "-3.txt";
  EXPECT_EQ(std::filesystem::path(path).filename(), expected_name);
  const std::string text = read_file(path);
  const std::string prefix = std::string(host) + ":" + std::to_string(getpid()) + " [3] ";
  EXPECT_EQ(text.rfind(prefix, 0), 0u) << text;
  EXPECT_NE(text.find("INFO comm: hello 42\n"), std::string::npos) << text;
}

// A process started without a launcher learns its rank only from MPI: a file named by rank waits for it (stderr
// until then), rather than being created for rank -1.
TEST_F(LogToFile, AFileNamedByRankWaitsForTheRank) {
  // No launcher: its rank variables would name the rank before MPI does.
  const test::ScopedEnv no_ompi("OMPI_COMM_WORLD_RANK", nullptr), no_pmix("PMIX_RANK", nullptr),
      no_pmi("PMI_RANK", nullptr), no_slurm("SLURM_PROCID", nullptr);
  log::set_rank(-1);
  TENAX_LOG(Warn, "comm") << "before the rank";
  for (const auto& entry : std::filesystem::directory_iterator(dir_))
    EXPECT_EQ(entry.path().string().find("--1.txt"), std::string::npos) << entry.path();
  log::set_rank(4);
  TENAX_LOG(Warn, "comm") << "with the rank";
  bool found = false;
  for (const auto& entry : std::filesystem::directory_iterator(dir_))
    if (entry.path().string().ends_with("-4.txt")) {
      found = true;
      EXPECT_NE(read_file(entry.path()).find("with the rank"), std::string::npos);
      EXPECT_EQ(read_file(entry.path()).find("before the rank"), std::string::npos);
    }
  EXPECT_TRUE(found) << "no log file for rank 4";
  log::set_rank(3);
}

TEST_F(LogToFile, LevelAndSubsystemFilter) {
  setenv("TENAX_LOG_LEVEL", "info", 1);
  setenv("TENAX_LOG_SUBSYS", "ckpt", 1);
  log::configure();
  TENAX_LOG(Debug, "ckpt") << "too detailed";
  TENAX_LOG(Info, "comm") << "other subsystem";
  TENAX_LOG(Info, "ckpt") << "shown";
  TENAX_LOG(Warn, "comm") << "warnings always pass the subsystem filter";
  const std::string text = read_file(only_file());
  EXPECT_EQ(text.find("too detailed"), std::string::npos) << text;
  EXPECT_EQ(text.find("other subsystem"), std::string::npos) << text;
  EXPECT_NE(text.find("shown"), std::string::npos) << text;
  EXPECT_NE(text.find("warnings always pass"), std::string::npos) << text;
}

TEST_F(LogToFile, ArgumentsAreNotEvaluatedWhenDisabled) {
  setenv("TENAX_LOG_LEVEL", "error", 1);
  log::configure();
  int evaluated = 0;
  auto count = [&] { return ++evaluated; };
  TENAX_LOG(Debug, "comm") << count();
  EXPECT_EQ(evaluated, 0);
}

// configure() while other threads log: every line lands, whole, in one of the two files the configuration switches
// between; none goes to a closed descriptor or to stderr in between, none is torn. (Run under ThreadSanitizer, the
// unsynchronised version of the configuration was also reported as a data race here.)
TEST_F(LogToFile, ReconfiguringWhileOtherThreadsWriteLosesNoLine) {
  constexpr int kWriters = 4;
  constexpr int kLines = 3000;
  const std::string file_a = (dir_ / "a-%r.txt").string();
  const std::string file_b = (dir_ / "b-%r.txt").string();
  setenv("TENAX_LOG_LEVEL", "info", 1);
  setenv("TENAX_LOG_SUBSYS", "race", 1);
  setenv("TENAX_LOG_FILE", file_a.c_str(), 1);
  log::configure();

  std::latch start(kWriters + 1);
  std::atomic<int> writers_done{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kLines; ++i)
        TENAX_LOG(Info, "race") << "line " << t << "-" << i << " end";
      writers_done.fetch_add(1);
    });
  }
  // Only this thread touches the environment: the writers read nothing but the published configuration.
  start.arrive_and_wait();
  int switches = 0;
  while (writers_done.load() < kWriters) {
    const bool to_b = switches % 2 == 0;
    setenv("TENAX_LOG_FILE", to_b ? file_b.c_str() : file_a.c_str(), 1);
    setenv("TENAX_LOG_SUBSYS", to_b ? "other,race,more" : "race", 1);
    log::configure();
    ++switches;
  }
  for (std::thread& w : writers)
    w.join();
  unsetenv("TENAX_LOG_FILE");
  log::configure();  // closes the last file

  std::set<std::string> seen;
  std::size_t lines = 0;
  for (const std::string& name : {std::string("a-3.txt"), std::string("b-3.txt")}) {
    std::ifstream in(dir_ / name);
    for (std::string line; std::getline(in, line);) {
      ++lines;
      const std::size_t at = line.find("INFO race: line ");
      ASSERT_NE(at, std::string::npos) << "torn line: " << line;
      ASSERT_TRUE(line.ends_with(" end")) << "torn line: " << line;
      seen.insert(line.substr(at));
    }
  }
  EXPECT_GT(switches, 1);
  EXPECT_EQ(lines, std::size_t{kWriters} * kLines) << "lines were lost or duplicated over " << switches << " switches";
  EXPECT_EQ(seen.size(), std::size_t{kWriters} * kLines);
}

}  // namespace
}  // namespace tenax
