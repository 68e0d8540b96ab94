// A fresh run directory per test and rank count, created by rank 0 and seen by every rank (tests run on one node).
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/mpi_test.hpp"

namespace tenax::test {

inline std::string fresh_run_dir(const std::string& name) {
  Communicator& w = world();
  const auto dir = std::filesystem::path(TENAX_METRICS_TEST_TMP) / (name + "-np" + std::to_string(w.size()));
  if (w.rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  w.barrier();
  return dir.string();
}

inline std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace tenax::test
