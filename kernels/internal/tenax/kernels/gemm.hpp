// Single-precision matrix product on row-major matrices: C = alpha * op(A) op(B) + beta * C, where op(A) is m x k,
// op(B) is k x n and C is m x n. lda/ldb/ldc are the row strides (in elements) of the matrices as stored, so A stored
// untransposed needs lda >= k, transposed lda >= m. OpenBLAS (cblas_sgemm) on the CPU, cuBLAS on the GPU.
#pragma once

#include <cstddef>

#include "tenax/dtype.hpp"
#include "tenax/kernels/config.hpp"
#include "tenax/kernels/params.hpp"

namespace tenax::kernels {

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

// A cuBLAS handle (cublasHandle_t) for the current device in full fp32 math (no TF32), for callers that keep one handle
// per execution stream instead of the per-thread handles above. Destroy it with destroy_blas_handle (on the same
// device, before the device is reset).
void* create_blas_handle();
void destroy_blas_handle(void* handle) noexcept;

// As gemm, with the caller's handle (bound to `stream` here; use a handle from one thread at a time).
void gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::size_t lda,
          const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc, void* stream, void* handle);

// Mixed precision: A and B hold 16-bit values (raw bits of `input_type`, BF16 or F16), C is fp32; the products are
// accumulated in fp32 on tensor cores (cublasGemmEx with CUBLAS_COMPUTE_32F), and beta = 1 accumulates into C (gradient
// accumulation across micro-batches stays fp32). Throws UsageError for any other input type.
void gemm_lowp(DType input_type, Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
               const void* a, std::size_t lda, const void* b, std::size_t ldb, float beta, float* c, std::size_t ldc,
               void* stream, void* handle);
}  // namespace cuda
#endif

}  // namespace tenax::kernels
