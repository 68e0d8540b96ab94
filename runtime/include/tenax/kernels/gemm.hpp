// Single-precision matrix product on row-major matrices: C = alpha * op(A) op(B) + beta * C, where op(A) is m x k,
// op(B) is k x n and C is m x n. lda/ldb/ldc are the row strides (in elements) of the matrices as stored, so A stored
// untransposed needs lda >= k, transposed lda >= m. OpenBLAS (cblas_sgemm) on the CPU, cuBLAS on the GPU.
#pragma once

#include <cstddef>

#include "tenax/build_config.hpp"

namespace tenax::kernels {

enum class Trans { No, Yes };

namespace cpu {
// Deterministic for a fixed OpenBLAS thread count (the runtime sets one thread on the CPU path). Throws UsageError for
// a leading dimension smaller than the stored row length or a size beyond the BLAS integer range.
void gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::size_t lda,
          const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc);
}  // namespace cpu

#if TENAX_HAVE_CUDA
namespace cuda {
// As cpu::gemm on device pointers, asynchronous on `stream`. Uses one cuBLAS handle per (thread, device), created on
// first use, in full fp32 (no TF32), so results match the CPU up to summation order.
void gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::size_t lda,
          const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc, void* stream);
}  // namespace cuda
#endif

}  // namespace tenax::kernels
