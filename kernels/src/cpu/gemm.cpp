#include "tenax/kernels/gemm.hpp"

#include <cblas.h>

#include "common/validate.hpp"

namespace tenax::kernels::cpu {

void gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a, std::size_t lda,
          const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  const bool a_t = ta == Trans::Yes;
  const bool b_t = tb == Trans::Yes;
  detail::validate_gemm(a_t, b_t, m, n, k, a, lda, b, ldb, c, ldc);
  if (m == 0 || n == 0) return;
  using detail::blas_int;
  cblas_sgemm(CblasRowMajor, a_t ? CblasTrans : CblasNoTrans, b_t ? CblasTrans : CblasNoTrans, blas_int("m", m),
              blas_int("n", n), blas_int("k", k), alpha, a, blas_int("lda", lda), b, blas_int("ldb", ldb), beta, c,
              blas_int("ldc", ldc));
}

}  // namespace tenax::kernels::cpu
