// Strided-batched single-precision matrix products on row-major matrices:
//   C_i = alpha * op(A_i) op(B_i) + beta * C_i   for i in [0, batch),
// with A_i = a + i*stride_a, B_i = b + i*stride_b, C_i = c + i*stride_c (strides in elements). Each product is exactly
// gemm.hpp's (op(A) m x k, op(B) k x n, C m x n, lda/ldb/ldc the stored row strides). A stride of 0 reuses one matrix
// for every product (a shared operand); the C matrices must not overlap (stride_c at least one C's span when
// batch > 1), since the products may run in any order or at once.
#pragma once

#include <cstddef>

#include "tenax/dtype.hpp"
#include "tenax/kernels/config.hpp"
#include "tenax/kernels/gemm.hpp"

namespace tenax::kernels {

// Elements each operand's batch spans, from the first element of its first matrix to the last element of its last
// (what a rounded 16-bit copy of the operand must hold), after checking every size and stride as batched_gemm does
// (UsageError). All 0 for an empty batch.
struct BatchedGemmSpans {
  std::size_t a = 0, b = 0, c = 0;
};
BatchedGemmSpans batched_gemm_spans(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, std::size_t lda,
                                    std::size_t stride_a, std::size_t ldb, std::size_t stride_b, std::size_t ldc,
                                    std::size_t stride_c, std::size_t batch);

namespace cpu {
// One cblas_sgemm per product, in order (OpenBLAS 0.3.21 has no batched interface); deterministic for a fixed OpenBLAS
// thread count. Throws UsageError for the bad strides gemm() refuses, overlapping C matrices, or a batch or span beyond
// the BLAS / 64-bit range.
void batched_gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                  std::size_t lda, std::size_t stride_a, const float* b, std::size_t ldb, std::size_t stride_b,
                  float beta, float* c, std::size_t ldc, std::size_t stride_c, std::size_t batch);
}  // namespace cpu

#if TENAX_HAVE_CUDA
namespace cuda {
// As cpu::batched_gemm on device pointers, asynchronous on `stream`, with the caller's cuBLAS handle
// (create_blas_handle in gemm.hpp: full fp32, no TF32): cublasSgemmStridedBatched.
void batched_gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                  std::size_t lda, std::size_t stride_a, const float* b, std::size_t ldb, std::size_t stride_b,
                  float beta, float* c, std::size_t ldc, std::size_t stride_c, std::size_t batch, void* stream,
                  void* handle);
// Mixed precision, as gemm_lowp: A and B hold 16-bit values (raw bits of `input_type`, BF16 or F16), C is fp32, fp32
// accumulation on tensor cores (cublasGemmStridedBatchedEx with CUBLAS_COMPUTE_32F). UsageError for another type.
void batched_gemm_lowp(DType input_type, Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
                       const void* a, std::size_t lda, std::size_t stride_a, const void* b, std::size_t ldb,
                       std::size_t stride_b, float beta, float* c, std::size_t ldc, std::size_t stride_c,
                       std::size_t batch, void* stream, void* handle);
}  // namespace cuda
#endif

}  // namespace tenax::kernels
