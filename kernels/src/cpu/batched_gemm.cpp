#include "tenax/kernels/batched_gemm.hpp"

#include <cblas.h>

#include "common/attention_validate.hpp"

namespace tenax::kernels {

BatchedGemmSpans batched_gemm_spans(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, std::size_t lda,
                                    std::size_t stride_a, std::size_t ldb, std::size_t stride_b, std::size_t ldc,
                                    std::size_t stride_c, std::size_t batch) {
  const bool a_t = ta == Trans::Yes;
  const bool b_t = tb == Trans::Yes;
  // Sizes and strides only: any non-null address stands in for the operands, which the product itself checks.
  const float stand_in = 0.0f;
  detail::validate_batched_gemm(a_t, b_t, m, n, k, &stand_in, lda, stride_a, &stand_in, ldb, stride_b, &stand_in, ldc,
                                stride_c, batch);
  if (batch == 0 || m == 0 || n == 0) return {};
  return {a_t ? detail::batch_span(k, m, lda, stride_a, batch) : detail::batch_span(m, k, lda, stride_a, batch),
          b_t ? detail::batch_span(n, k, ldb, stride_b, batch) : detail::batch_span(k, n, ldb, stride_b, batch),
          detail::batch_span(m, n, ldc, stride_c, batch)};
}

namespace cpu {

void batched_gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                  std::size_t lda, std::size_t stride_a, const float* b, std::size_t ldb, std::size_t stride_b,
                  float beta, float* c, std::size_t ldc, std::size_t stride_c, std::size_t batch) {
  const bool a_t = ta == Trans::Yes;
  const bool b_t = tb == Trans::Yes;
  detail::validate_batched_gemm(a_t, b_t, m, n, k, a, lda, stride_a, b, ldb, stride_b, c, ldc, stride_c, batch);
  if (batch == 0 || m == 0 || n == 0) return;
  using detail::blas_int;
  const int im = blas_int("m", m), in = blas_int("n", n), ik = blas_int("k", k);
  const int ilda = blas_int("lda", lda), ildb = blas_int("ldb", ldb), ildc = blas_int("ldc", ldc);
  for (std::size_t i = 0; i < batch; ++i)
    cblas_sgemm(CblasRowMajor, a_t ? CblasTrans : CblasNoTrans, b_t ? CblasTrans : CblasNoTrans, im, in, ik, alpha,
                a + i * stride_a, ilda, b + i * stride_b, ildb, beta, c + i * stride_c, ildc);
}

}  // namespace cpu
}  // namespace tenax::kernels
