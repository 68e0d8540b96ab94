#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

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
    dir_ = std::filesystem::temp_directory_path() / ("tenax-log-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
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

}  // namespace
}  // namespace tenax
