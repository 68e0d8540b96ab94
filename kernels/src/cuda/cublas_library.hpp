// cuBLAS, opened on its first use instead of linked.
//
// Why: cuBLAS pulls in cuBLASLt, together 600 MB of shared objects with 360 000 relocations that every process pays at
// start, GPU or not: a program that does nothing but link cuBLAS took 0.09 s to run, and 4 ranks on 2 cores started
// 0.15 s later, on the critical path of every restart. A CPU-only run never calls cuBLAS, so it never loads it now;
// the first CUDA execution context (ExecutionContext::cuda, which creates its cuBLAS handle) opens it, thread-safe,
// once per process.
//
// Every entry point tenax uses is resolved when the library is opened, so a cuBLAS without one of them is refused at
// once with the library's path, not at the first call of that function.
#pragma once

#include <cublas_v2.h>

#include <string>

namespace tenax::kernels::detail {

// cublas_api.h overloads these two with inline wrappers for an old compute-type argument; the library's own symbols are
// these signatures (the static_cast below only compiles if the header declares exactly them).
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                        const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                        const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using CublasGemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                                      int, const void*, const void*, cudaDataType, int, long long,
                                                      const void*, cudaDataType, int, long long, const void*, void*,
                                                      cudaDataType, int, long long, int, cublasComputeType_t,
                                                      cublasGemmAlgo_t);
static_assert(sizeof(static_cast<CublasGemmEx>(&cublasGemmEx)) == sizeof(void*));
static_assert(sizeof(static_cast<CublasGemmStridedBatchedEx>(&cublasGemmStridedBatchedEx)) == sizeof(void*));

struct CublasLibrary {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  CublasGemmEx gemm_ex = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
  CublasGemmStridedBatchedEx gemm_strided_batched_ex = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  std::string path;  // what was opened: the soname, else the library the build was linked against
};

// The opened library. Throws tenax::DeviceError naming both places it looked, and dlerror's reason, when cuBLAS cannot
// be opened or lacks an entry point (the same error on every later call).
const CublasLibrary& cublas();

}  // namespace tenax::kernels::detail
