// main() for GoogleTest binaries that run on every rank under mpirun.
//
// Every rank runs every test. Only rank 0 prints the normal progress; other ranks print only their failures (prefixed
// by the rank), so a failure on any rank is visible. The exit code is non-zero on every rank if any rank failed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "common/mpi_test.hpp"
#include "tenax/env.hpp"
#include "tenax/runtime.hpp"

namespace tenax::test {
namespace {

Runtime* g_runtime = nullptr;

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.summary());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

}  // namespace

Communicator& world() {
  return g_runtime->world();
}

bool gpu_required() {
  return env::get_bool("TENAX_TEST_GPU");
}

}  // namespace tenax::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto runtime = std::make_unique<tenax::Runtime>(argc, argv);
  tenax::test::g_runtime = runtime.get();
  const int rank = runtime->rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new tenax::test::RankFailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = failed;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed && !failed) std::fprintf(stderr, "tests failed on another rank (see [rank N] lines)\n");
  tenax::test::g_runtime = nullptr;
  runtime.reset();
  return any_failed;
}
