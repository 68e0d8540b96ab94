// cuBLAS-backed gemm on row-major matrices: fp32 (cublasSgemm, no TF32) and 16-bit inputs with fp32 accumulation
// (cublasGemmEx, tensor cores), single and strided-batched (cublasSgemmStridedBatched, cublasGemmStridedBatchedEx).
#include "tenax/kernels/gemm.hpp"
#include "tenax/kernels/batched_gemm.hpp"

#include <cublas_v2.h>

#include <vector>

#include "common/attention_validate.hpp"
#include "common/validate.hpp"
#include "cuda/check.hpp"
#include "cuda/cublas_library.hpp"
#include "cuda/launch.hpp"

namespace tenax::kernels::cuda {
namespace {

using detail::cublas;  // opened on first use (cublas_library.hpp)

cublasHandle_t make_handle() {
  cublasHandle_t h = nullptr;
  TENAX_CUBLAS_CHECK(cublas().create(&h));
  // Default math: full fp32 products, no TF32, so the fp32 path agrees with the CPU reference up to summation order.
  // 16-bit inputs (gemm_lowp) use tensor cores under this mode too: it only forbids down-converting fp32 inputs.
  const cublasStatus_t mode = cublas().set_math_mode(h, CUBLAS_DEFAULT_MATH);
  if (mode != CUBLAS_STATUS_SUCCESS) {
    cublas().destroy(h);
    TENAX_CUBLAS_CHECK(mode);
  }
  return h;
}

// One cuBLAS handle per (thread, device): a handle is not safe to share between threads that set different streams,
// and creating one costs milliseconds, so it is made on first use and kept for the thread's lifetime.
class ThreadHandles {
 public:
  ThreadHandles() = default;
  ThreadHandles(const ThreadHandles&) = delete;
  ThreadHandles& operator=(const ThreadHandles&) = delete;
  ~ThreadHandles() {
    for (cublasHandle_t h : by_device_)
      if (h != nullptr) cublas().destroy(h);  // best effort at thread exit: nothing to report to
  }

  cublasHandle_t current() {
    int device = 0;
    TENAX_CUDA_CHECK(cudaGetDevice(&device));
    if (by_device_.size() <= static_cast<std::size_t>(device)) by_device_.resize(device + 1, nullptr);
    cublasHandle_t& h = by_device_[device];
    if (h == nullptr) h = make_handle();
    return h;
  }

 private:
  std::vector<cublasHandle_t> by_device_;
};

cublasOperation_t op(bool transposed) {
  return transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
}

}  // namespace

void* create_blas_handle() {
  return make_handle();
}

void destroy_blas_handle(void* handle) noexcept {
  if (handle != nullptr) cublas().destroy(static_cast<cublasHandle_t>(handle));
}

void gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::size_t lda,
          const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc, void* stream, void* handle) {
  const bool a_t = ta == Trans::Yes;
  const bool b_t = tb == Trans::Yes;
  detail::validate_gemm(a_t, b_t, m, n, k, a, lda, b, ldb, c, ldc);
  if (m == 0 || n == 0) return;
  auto* h = static_cast<cublasHandle_t>(handle);
  TENAX_CUBLAS_CHECK(cublas().set_stream(h, detail::to_stream(stream)));
  // cuBLAS is column-major. A row-major matrix is the column-major view of its transpose, so C = op(A) op(B) in
  // row-major is C^T = op(B)^T op(A)^T in column-major: swap the operands (and m with n); the transpose flags stay.
  using detail::blas_int;
  TENAX_CUBLAS_CHECK(cublas().sgemm(h, op(b_t), op(a_t), blas_int("n", n), blas_int("m", m), blas_int("k", k), &alpha,
                                    b, blas_int("ldb", ldb), a, blas_int("lda", lda), &beta, c, blas_int("ldc", ldc)));
}

void gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::size_t lda,
          const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc, void* stream) {
  thread_local ThreadHandles handles;
  // Validation first, so bad arguments are rejected before a handle (and a CUDA context) is created.
  detail::validate_gemm(ta == Trans::Yes, tb == Trans::Yes, m, n, k, a, lda, b, ldb, c, ldc);
  if (m == 0 || n == 0) return;
  gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream, handles.current());
}

void gemm_lowp(DType input_type, Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
               const void* a, std::size_t lda, const void* b, std::size_t ldb, float beta, float* c, std::size_t ldc,
               void* stream, void* handle) {
  if (input_type != DType::BF16 && input_type != DType::F16)
    detail::usage_error("gemm_lowp", "input_type is " + std::string(dtype_name(input_type)) + "; use bf16 or f16");
  const bool a_t = ta == Trans::Yes;
  const bool b_t = tb == Trans::Yes;
  detail::validate_gemm(a_t, b_t, m, n, k, a, lda, b, ldb, c, ldc);
  if (m == 0 || n == 0) return;
  auto* h = static_cast<cublasHandle_t>(handle);
  TENAX_CUBLAS_CHECK(cublas().set_stream(h, detail::to_stream(stream)));
  const cudaDataType_t in = input_type == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
  using detail::blas_int;
  // Same operand swap as the fp32 gemm. CUBLAS_COMPUTE_32F: fp32 accumulation and fp32 alpha/beta; the 16-bit inputs
  // make cuBLAS pick tensor-core kernels.
  TENAX_CUBLAS_CHECK(cublas().gemm_ex(h, op(b_t), op(a_t), blas_int("n", n), blas_int("m", m), blas_int("k", k), &alpha,
                                      b, in, blas_int("ldb", ldb), a, in, blas_int("lda", lda), &beta, c, CUDA_R_32F,
                                      blas_int("ldc", ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void batched_gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                  std::size_t lda, std::size_t stride_a, const float* b, std::size_t ldb, std::size_t stride_b,
                  float beta, float* c, std::size_t ldc, std::size_t stride_c, std::size_t batch, void* stream,
                  void* handle) {
  const bool a_t = ta == Trans::Yes;
  const bool b_t = tb == Trans::Yes;
  detail::validate_batched_gemm(a_t, b_t, m, n, k, a, lda, stride_a, b, ldb, stride_b, c, ldc, stride_c, batch);
  if (batch == 0 || m == 0 || n == 0) return;
  auto* h = static_cast<cublasHandle_t>(handle);
  TENAX_CUBLAS_CHECK(cublas().set_stream(h, detail::to_stream(stream)));
  using detail::blas_int;
  // The same operand swap as gemm() (row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T), per matrix.
  TENAX_CUBLAS_CHECK(cublas().sgemm_strided_batched(
      h, op(b_t), op(a_t), blas_int("n", n), blas_int("m", m), blas_int("k", k), &alpha, b, blas_int("ldb", ldb),
      static_cast<long long>(stride_b), a, blas_int("lda", lda), static_cast<long long>(stride_a), &beta, c,
      blas_int("ldc", ldc), static_cast<long long>(stride_c), blas_int("batch", batch)));
}

void batched_gemm_lowp(DType input_type, Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
                       const void* a, std::size_t lda, std::size_t stride_a, const void* b, std::size_t ldb,
                       std::size_t stride_b, float beta, float* c, std::size_t ldc, std::size_t stride_c,
                       std::size_t batch, void* stream, void* handle) {
  if (input_type != DType::BF16 && input_type != DType::F16)
    detail::usage_error("batched_gemm_lowp",
                        "input_type is " + std::string(dtype_name(input_type)) + "; use bf16 or f16");
  const bool a_t = ta == Trans::Yes;
  const bool b_t = tb == Trans::Yes;
  detail::validate_batched_gemm(a_t, b_t, m, n, k, a, lda, stride_a, b, ldb, stride_b, c, ldc, stride_c, batch);
  if (batch == 0 || m == 0 || n == 0) return;
  auto* h = static_cast<cublasHandle_t>(handle);
  TENAX_CUBLAS_CHECK(cublas().set_stream(h, detail::to_stream(stream)));
  const cudaDataType_t in = input_type == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
  using detail::blas_int;
  TENAX_CUBLAS_CHECK(cublas().gemm_strided_batched_ex(
      h, op(b_t), op(a_t), blas_int("n", n), blas_int("m", m), blas_int("k", k), &alpha, b, in, blas_int("ldb", ldb),
      static_cast<long long>(stride_b), a, in, blas_int("lda", lda), static_cast<long long>(stride_a), &beta, c,
      CUDA_R_32F, blas_int("ldc", ldc), static_cast<long long>(stride_c), blas_int("batch", batch), CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
}

}  // namespace tenax::kernels::cuda
