// The causal attention core on the CPU, one head at a time in blocks of query rows.
//
// Why blocks: row block [r0, r1) of the causal scores only needs keys [0, r1), so forming S, P V, dP and the three
// gradient products block by block skips the masked upper triangle (with T = 4 blocks, 10/16 of the full products) and
// keeps a block's scores (kQueryBlock x T floats) in cache between the product that writes them, the softmax and the
// product that reads them. Without saved probabilities the whole core needs only that block as scratch, so
// recomputing P in the backward costs one more Q K^T block product and a softmax per block, nothing of size T x T.
#include <algorithm>
#include <initializer_list>
#include <utility>
#include <vector>

#include <cblas.h>

#include "common/attention_validate.hpp"
#include "common/causal_softmax_rows.hpp"
#include "tenax/kernels/attention.hpp"

namespace tenax::kernels::cpu {
namespace {

constexpr std::size_t kQueryBlock = 32;

struct Head {
  std::size_t T, D;
  int t, d;  // the same as BLAS ints (attention_dims bounds them)
};

// c[rows x cols] (ldc) = alpha op(a) op(b) + beta c, row-major, single-precision.
void sgemm(bool a_t, bool b_t, int rows, int cols, int inner, const float* a, int lda, const float* b, int ldb,
           float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, a_t ? CblasTrans : CblasNoTrans, b_t ? CblasTrans : CblasNoTrans, rows, cols, inner, 1.0f,
              a, lda, b, ldb, beta, c, ldc);
}

// Rows [r0, r1) of one head's probabilities into p (row stride T): the causal scores Q[r0:r1] K[0:r1]^T, then the
// softmax of each row with zeros up to column r1 (or T when the block is the saved probabilities, `width`).
void probabilities_block(const Head& h, const float* q, const float* k, std::size_t r0, std::size_t r1, float scale,
                         float* p, std::size_t width) {
  const int rows = static_cast<int>(r1 - r0), keys = static_cast<int>(r1);
  sgemm(false, true, rows, keys, h.d, q + r0 * h.D, h.d, k, h.d, 0.0f, p, h.t);
  for (std::size_t i = r0; i < r1; ++i)
    detail::causal_softmax_row(p + (i - r0) * h.T, i + 1, width, scale);
}

// A per-thread scratch of at least n floats, kept between calls (fresh pages are expensive on these VMs).
float* scratch(std::vector<float>& buffer, std::size_t n) {
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

// The probabilities are optional (null: not saved / recompute), every per-head tensor is required.
void check(const char* op, const detail::AttentionDims& dims, float scale,
           std::initializer_list<std::pair<const void*, const char*>> heads) {
  detail::require_finite_scale(op, scale);
  for (auto [p, name] : heads)
    detail::require_pointer(op, p, dims.head_elems, name);
}

}  // namespace

void attention_forward(const float* q, const float* k, const float* v, float* out, float* probs_saved, std::size_t B,
                       std::size_t H, std::size_t T, std::size_t D, float scale) {
  const detail::AttentionDims dims = detail::attention_dims("attention_forward", B, H, T, D);
  check("attention_forward", dims, scale, {{q, "q"}, {k, "k"}, {v, "v"}, {out, "out"}});
  if (dims.score_elems == 0 || D == 0) return;
  const Head h{T, D, static_cast<int>(T), static_cast<int>(D)};
  thread_local std::vector<float> block_buffer;
  float* block = probs_saved == nullptr ? scratch(block_buffer, kQueryBlock * T) : nullptr;
  for (std::size_t bh = 0; bh < dims.heads; ++bh) {
    const float* qh = q + bh * T * D;
    const float* kh = k + bh * T * D;
    const float* vh = v + bh * T * D;
    float* oh = out + bh * T * D;
    for (std::size_t r0 = 0; r0 < T; r0 += kQueryBlock) {
      const std::size_t r1 = std::min(T, r0 + kQueryBlock);
      float* p = probs_saved != nullptr ? probs_saved + (bh * T + r0) * T : block;
      probabilities_block(h, qh, kh, r0, r1, scale, p, probs_saved != nullptr ? T : r1);
      // O[r0:r1] = P[r0:r1, 0:r1] V[0:r1]: the keys beyond r1 have probability 0.
      sgemm(false, false, static_cast<int>(r1 - r0), h.d, static_cast<int>(r1), p, h.t, vh, h.d, 0.0f, oh + r0 * D,
            h.d);
    }
  }
}

void attention_backward(const float* q, const float* k, const float* v, const float* d_out, const float* probs,
                        float* dq, float* dk, float* dv, std::size_t B, std::size_t H, std::size_t T, std::size_t D,
                        float scale) {
  const detail::AttentionDims dims = detail::attention_dims("attention_backward", B, H, T, D);
  check("attention_backward", dims, scale,
        {{q, "q"}, {k, "k"}, {v, "v"}, {d_out, "d_out"}, {dq, "dq"}, {dk, "dk"}, {dv, "dv"}});
  if (dims.score_elems == 0 || D == 0) return;
  const Head h{T, D, static_cast<int>(T), static_cast<int>(D)};
  thread_local std::vector<float> buffer;
  float* grad_block = scratch(buffer, 2 * kQueryBlock * T);  // dP, then dS in place
  float* prob_block = grad_block + kQueryBlock * T;          // recomputed P (when not saved)
  const std::size_t blocks = (T + kQueryBlock - 1) / kQueryBlock;
  for (std::size_t bh = 0; bh < dims.heads; ++bh) {
    const std::size_t off = bh * T * D;
    // The last block first: it reaches every key, so its dK/dV products write all T rows (beta 0), and the earlier
    // blocks, which reach keys [0, r1) only, add to them. A fixed order: deterministic.
    for (std::size_t blk = blocks; blk-- > 0;) {
      const std::size_t r0 = blk * kQueryBlock, r1 = std::min(T, r0 + kQueryBlock);
      const int rows = static_cast<int>(r1 - r0), keys = static_cast<int>(r1);
      const float beta = blk + 1 == blocks ? 0.0f : 1.0f;
      const float* p = prob_block;
      if (probs != nullptr)
        p = probs + (bh * T + r0) * T;
      else
        probabilities_block(h, q + off, k + off, r0, r1, scale, prob_block, r1);
      const float* dor = d_out + off + r0 * D;
      // dV[0:r1] (+)= P[r0:r1, 0:r1]^T dO[r0:r1]
      sgemm(true, false, keys, h.d, rows, p, h.t, dor, h.d, beta, dv + off, h.d);
      // dP[r0:r1, 0:r1] = dO[r0:r1] V[0:r1]^T, then dS in place.
      sgemm(false, true, rows, keys, h.d, dor, h.d, v + off, h.d, 0.0f, grad_block, h.t);
      for (std::size_t i = r0; i < r1; ++i) {
        float* g = grad_block + (i - r0) * T;
        detail::causal_softmax_backward_row(p + (i - r0) * T, g, g, i + 1, r1, scale);
      }
      // dQ[r0:r1] = dS[r0:r1, 0:r1] K[0:r1];  dK[0:r1] (+)= dS[r0:r1, 0:r1]^T Q[r0:r1]
      sgemm(false, false, rows, h.d, keys, grad_block, h.t, k + off, h.d, 0.0f, dq + off + r0 * D, h.d);
      sgemm(true, false, keys, h.d, rows, grad_block, h.t, q + off + r0 * D, h.d, beta, dk + off, h.d);
    }
  }
}

}  // namespace tenax::kernels::cpu
