// Run directories of the MPI metrics tests (tests run on one node: every rank sees what rank 0 creates).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/mpi_test.hpp"
#include "scratch_dir.hpp"

namespace tenax::test {

// A fresh run directory for one test: made by rank 0 (unique per test, rank count and process, under
// TENAX_METRICS_TEST_TMP), its path broadcast to every rank; removed by rank 0 once every rank is done with it (kept
// when METRICS_TEST_KEEP_DIRS is set).
class RunDir {
 public:
  explicit RunDir(const std::string& name) {
    Communicator& w = world();
    std::string path;
    if (w.rank() == 0) path = make_unique_dir(TENAX_METRICS_TEST_TMP, name + "-np" + std::to_string(w.size()));
    std::uint64_t length = path.size();
    w.broadcast(&length, 1, DType::I64, 0);
    path.resize(length);
    w.broadcast(path.data(), length, DType::U8, 0);
    path_ = path;
  }
  ~RunDir() {
    Communicator& w = world();
    w.barrier();  // every rank has finished reading
    std::error_code ignored;
    if (w.rank() == 0 && std::getenv("METRICS_TEST_KEEP_DIRS") == nullptr) std::filesystem::remove_all(path_, ignored);
  }
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

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
