// cuBLAS-backed fp32 gemm on row-major matrices.
#include "tenax/kernels/gemm.hpp"

#include <cublas_v2.h>

#include <vector>

#include "common/validate.hpp"
#include "cuda/check.hpp"
#include "cuda/launch.hpp"

namespace tenax::kernels::cuda {
namespace {

// One cuBLAS handle per (thread, device): a handle is not safe to share between threads that set different streams,
// and creating one costs milliseconds, so it is made on first use and kept for the thread's lifetime.
class ThreadHandles {
 public:
  ThreadHandles() = default;
  ThreadHandles(const ThreadHandles&) = delete;
  ThreadHandles& operator=(const ThreadHandles&) = delete;
  ~ThreadHandles() {
    for (cublasHandle_t h : by_device_)
      if (h != nullptr) cublasDestroy(h);  // best effort at thread exit: nothing to report to
  }

  cublasHandle_t current() {
    int device = 0;
    TENAX_CUDA_CHECK(cudaGetDevice(&device));
    if (by_device_.size() <= static_cast<std::size_t>(device)) by_device_.resize(device + 1, nullptr);
    cublasHandle_t& h = by_device_[device];
    if (h == nullptr) {
      TENAX_CUBLAS_CHECK(cublasCreate(&h));
      // Default math: full fp32 products, no TF32, so the CUDA path agrees with the CPU reference up to summation
      // order.
      TENAX_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    }
    return h;
  }

 private:
  std::vector<cublasHandle_t> by_device_;
};

}  // namespace

void gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::size_t lda,
          const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc, void* stream) {
  const bool a_t = ta == Trans::Yes;
  const bool b_t = tb == Trans::Yes;
  detail::validate_gemm(a_t, b_t, m, n, k, a, lda, b, ldb, c, ldc);
  if (m == 0 || n == 0) return;
  thread_local ThreadHandles handles;
  cublasHandle_t h = handles.current();
  TENAX_CUBLAS_CHECK(cublasSetStream(h, detail::to_stream(stream)));
  // cuBLAS is column-major. A row-major matrix is the column-major view of its transpose, so C = op(A) op(B) in
  // row-major is C^T = op(B)^T op(A)^T in column-major: swap the operands (and m with n); the transpose flags stay.
  using detail::blas_int;
  TENAX_CUBLAS_CHECK(cublasSgemm(h, b_t ? CUBLAS_OP_T : CUBLAS_OP_N, a_t ? CUBLAS_OP_T : CUBLAS_OP_N, blas_int("n", n),
                                 blas_int("m", m), blas_int("k", k), &alpha, b, blas_int("ldb", ldb), a,
                                 blas_int("lda", lda), &beta, c, blas_int("ldc", ldc)));
}

}  // namespace tenax::kernels::cuda
