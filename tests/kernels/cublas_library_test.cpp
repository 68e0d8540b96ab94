// cuBLAS is opened on first use, not at program start (a CPU-only rank never pays for loading it), and once opened
// every entry point tenax calls is there. Needs the CUDA toolkit's cuBLAS, not a GPU: dlopen and dlsym only.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "cuda/cublas_library.hpp"

namespace tenax::kernels::detail {
namespace {

bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find(library) != std::string::npos) return true;
  return false;
}

TEST(CublasLibrary, IsOpenedOnFirstUseWithEveryEntryPoint) {
  // ctest runs each test in a process of its own, where nothing has asked for cuBLAS before this line. A run of the
  // whole binary in one process (the GPU suite's compute-sanitizer pass) may have opened it in an earlier test.
  if (::testing::UnitTest::GetInstance()->test_to_run_count() == 1) {
    EXPECT_FALSE(mapped("libcublas.so")) << "cuBLAS was loaded at program start";
    EXPECT_FALSE(mapped("libcublasLt.so"));
  }
  const CublasLibrary& l = cublas();
  EXPECT_TRUE(mapped("libcublas.so"));
  EXPECT_FALSE(l.path.empty());
  EXPECT_NE(l.create, nullptr);
  EXPECT_NE(l.destroy, nullptr);
  EXPECT_NE(l.set_stream, nullptr);
  EXPECT_NE(l.set_math_mode, nullptr);
  EXPECT_NE(l.sgemm, nullptr);
  EXPECT_NE(l.gemm_ex, nullptr);
  EXPECT_NE(l.sgemm_strided_batched, nullptr);
  EXPECT_NE(l.gemm_strided_batched_ex, nullptr);
  EXPECT_STREQ(l.status_name(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_EQ(&cublas(), &l) << "opened once";
}

}  // namespace
}  // namespace tenax::kernels::detail
