// Size and argument checks of the attention kernels and the batched products, shared by the CPU and CUDA entry points
// so that both refuse the same input with the same message before any memory is touched. Every size is formed with
// overflow-checked 64-bit arithmetic.
#pragma once

#include <climits>
#include <cmath>
#include <cstddef>
#include <string>
#include <tuple>
#include <utility>

#include "common/validate.hpp"

namespace tenax::kernels::detail {

// The sizes of one attention problem (attention.hpp's layout).
struct AttentionDims {
  std::size_t heads = 0;        // B*H matrices per tensor
  std::size_t head_elems = 0;   // B*H*T*D: one of q, k, v, o
  std::size_t score_elems = 0;  // B*H*T*T: the scores or probabilities
  std::size_t rows = 0;         // B*T rows of the packed matrices
  bool empty() const { return head_elems == 0 && score_elems == 0; }
};

// Refuses sizes whose element or byte counts overflow, and sizes beyond what the products and the device kernels index
// (32-bit BLAS dimensions and batch counts, 32-bit column arithmetic within a packed row).
inline AttentionDims attention_dims(const char* op, std::size_t B, std::size_t H, std::size_t T, std::size_t D) {
  const std::string sizes = " (B = " + std::to_string(B) + ", H = " + std::to_string(H) + ", T = " + std::to_string(T) +
                            ", D = " + std::to_string(D) + ")";
  std::size_t bh = 0, btd = 0, head = 0, bht = 0, score = 0, packed = 0, score_bytes = 0, head_bytes = 0;
  // 16 bytes per element bounds every buffer and workspace formed from these counts (fp32 + fp32 + 16-bit copies).
  if (__builtin_mul_overflow(B, H, &bh) || __builtin_mul_overflow(bh, T, &bht) ||
      __builtin_mul_overflow(bht, D, &head) || __builtin_mul_overflow(bht, T, &score) ||
      __builtin_mul_overflow(B, T, &btd) || __builtin_mul_overflow(H, D, &packed) ||
      __builtin_mul_overflow(packed, std::size_t{3}, &packed) || __builtin_mul_overflow(score, 16, &score_bytes) ||
      __builtin_mul_overflow(head, 16, &head_bytes))
    usage_error(op, "the attention sizes overflow 64-bit element or byte counts" + sizes +
                        "; split the micro-batch or shorten the sequence");
  const std::size_t limit = INT_MAX;
  if (bh > limit || T > limit || D > limit || packed > limit || btd > limit)
    usage_error(op, "B*H, T, D, B*T and 3*H*D must each be at most " + std::to_string(limit) + sizes +
                        "; split the micro-batch");
  return {bh, head, score, btd};
}

inline void require_finite_scale(const char* op, float scale) {
  if (!std::isfinite(scale))
    usage_error(op, "scale is " + std::to_string(scale) + "; it must be finite (usually 1/sqrt(head size))");
}

// Every size and stride of a strided-batched product (batched_gemm.hpp): gemm()'s checks for one product, a batch count
// in the BLAS range, no overlap between the C matrices, and spans (last matrix's end) that fit in 64 bits and in the
// signed strides cuBLAS takes.
inline void validate_batched_gemm(bool a_t, bool b_t, std::size_t m, std::size_t n, std::size_t k, const void* a,
                                  std::size_t lda, std::size_t stride_a, const void* b, std::size_t ldb,
                                  std::size_t stride_b, const void* c, std::size_t ldc, std::size_t stride_c,
                                  std::size_t batch) {
  // An empty batch touches no matrix: its pointers may be null (any non-null address stands in for them).
  const void* any = &batch;
  validate_gemm(a_t, b_t, m, n, k, batch > 0 ? a : any, lda, batch > 0 ? b : any, ldb, batch > 0 ? c : any, ldc);
  if (batch > static_cast<std::size_t>(INT_MAX))
    usage_error("batched_gemm",
                "batch = " + std::to_string(batch) + " exceeds the BLAS integer range; split the batch");
  for (auto [stride, name] :
       {std::pair{stride_a, "stride_a"}, std::pair{stride_b, "stride_b"}, std::pair{stride_c, "stride_c"}})
    if (stride > static_cast<std::size_t>(LLONG_MAX))
      usage_error("batched_gemm",
                  std::string(name) + " = " + std::to_string(stride) + " exceeds the signed 64-bit range");
  if (batch == 0 || m == 0 || n == 0) return;
  const std::size_t c_span = matrix_span("batched_gemm", m, n, ldc);
  if (batch > 1 && stride_c < c_span)
    usage_error("batched_gemm", "stride_c = " + std::to_string(stride_c) + " but one C matrix spans " +
                                    std::to_string(c_span) +
                                    " elements (the outputs would overlap); use stride_c >= " + std::to_string(c_span));
  const std::size_t a_span = a_t ? matrix_span("batched_gemm", k, m, lda) : matrix_span("batched_gemm", m, k, lda);
  const std::size_t b_span = b_t ? matrix_span("batched_gemm", n, k, ldb) : matrix_span("batched_gemm", k, n, ldb);
  for (auto [stride, span, name] :
       {std::tuple{stride_a, a_span, "a"}, std::tuple{stride_b, b_span, "b"}, std::tuple{stride_c, c_span, "c"}})
    checked_add("batched_gemm", checked_mul("batched_gemm", batch - 1, stride, "(batch - 1) * stride"), span, name);
}

// Elements spanned by a whole strided batch of stored matrices (what a rounded copy of the operand must hold).
inline std::size_t batch_span(std::size_t rows, std::size_t cols, std::size_t ld, std::size_t stride,
                              std::size_t batch) {
  const std::size_t one = matrix_span("batched_gemm", rows, cols, ld);
  return one == 0 || batch == 0 ? 0 : (batch - 1) * stride + one;  // checked by validate_batched_gemm
}

}  // namespace tenax::kernels::detail
