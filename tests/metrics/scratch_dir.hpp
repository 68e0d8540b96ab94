// A directory of one's own for a test that writes files: unique per test case and process (mkdtemp under
// TENAX_METRICS_TEST_TMP, named after the test), removed at the end (kept when METRICS_TEST_KEEP_DIRS is set). ctest
// runs the cases of one binary as separate processes in parallel: a fixed path shared by two cases lets one delete
// or overwrite the other's files.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace tenax::test {

inline std::string make_unique_dir(const std::string& base, const std::string& name) {
  std::filesystem::create_directories(base);
  std::string pattern = base + "/" + name + "-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern + " failed");
  return buffer.data();
}

// "Suite.Case" of the running test (slashes of parameterised names replaced), for directory names.
inline std::string current_test_name() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "no-test";
  for (char& c : name)
    if (c == '/') c = '_';
  return name;
}

class ScratchDir {
 public:
  ScratchDir() : path_(make_unique_dir(TENAX_METRICS_TEST_TMP, current_test_name())) {}
  ~ScratchDir() {
    std::error_code ignored;
    if (std::getenv("METRICS_TEST_KEEP_DIRS") == nullptr) std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace tenax::test
