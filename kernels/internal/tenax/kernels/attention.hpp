// The attention core of a GPT-2-style decoder (causal self-attention) on one tensor-parallel rank: head split and
// merge, the fused causal scale-mask-softmax and its backward, and the whole core composed of them.
//
// Sizes: per micro-batch, B sequences of T tokens; H heads of size D on this rank (H = total heads / tp).
//
// Layout convention (the layers follow it):
//
//   qkv     the column-parallel QKV projection's output, row-major [B*T, 3*H*D], row b*T + t. Head-major: each
//           head owns 3*D consecutive columns holding its q, then its k, then its v:
//               column h*3*D + 0*D + d = q[b, h, t, d]
//               column h*3*D + 1*D + d = k[b, h, t, d]
//               column h*3*D + 2*D + d = v[b, h, t, d]
//           The projection's full weight [3*H_total*D, in] (tensor_parallel.hpp: W [out, in], split by output rows) has
//           its output rows in the same order over the global heads: row g*3*D + s*D + d is part s (q, k, v) of global
//           head g. The contiguous column-parallel split then gives rank r exactly the q, k and v of global heads
//           [r*H, (r+1)*H), already in the local order above, and the QKV bias splits the same way. The order does not
//           depend on tp, so a checkpoint saved with one tp size loads with another (Megatron's order; a grouped order,
//           all heads' q, then all k, then all v, would have to change with tp and break tp resharding).
//   q k v o the per-head tensors and their gradients: [B, H, T, D] contiguous, element ((b*H + h)*T + t)*D + d, so each
//           (b, h) is one row-major [T, D] matrix and the matrix products run over B*H matrices with stride T*D.
//   scores  scores and probabilities: [B*H*T, T], B*H blocks of T x T; row i of a block is query position i and may
//   probs   attend to key positions j <= i (causal). Masked entries (j > i) of a probability or score gradient are
//           exactly 0.
//   y       the attention output, input of the row-parallel output projection: [B*T, H*D], head h's D columns at h*D
//           (column h*D + d of row b*T + t = o[b, h, t, d]).
//
// The core: S = Q K^T, P = causal_softmax(scale * S), O = P V, with scale usually 1/sqrt(D). The scale lives in the
// softmax (forward and backward), not in the products: the backward's dS already carries it, so dQ = dS K and
// dK = dS^T Q without a further factor.
//
// Every size is checked with overflow-checked 64-bit arithmetic before memory is touched (UsageError naming the sizes);
// an empty problem (any size 0) does nothing. Pointers may be null only when their tensor is empty.
#pragma once

#include <cstddef>

#include "tenax/dtype.hpp"
#include "tenax/kernels/config.hpp"

namespace tenax::kernels {

namespace cpu {
// qkv [B*T, 3*H*D] -> q, k, v [B, H, T, D] (copies; none may overlap another).
void split_heads(const float* qkv, float* q, float* k, float* v, std::size_t B, std::size_t H, std::size_t T,
                 std::size_t D);
// The backward of split_heads: dq, dk, dv [B, H, T, D] -> dqkv [B*T, 3*H*D] (written, not accumulated).
void split_heads_backward(const float* dq, const float* dk, const float* dv, float* dqkv, std::size_t B, std::size_t H,
                          std::size_t T, std::size_t D);
// o [B, H, T, D] -> y [B*T, H*D].
void merge_heads(const float* o, float* y, std::size_t B, std::size_t H, std::size_t T, std::size_t D);
// The backward of merge_heads: dy [B*T, H*D] -> d_o [B, H, T, D] (written).
void merge_heads_backward(const float* dy, float* d_o, std::size_t B, std::size_t H, std::size_t T, std::size_t D);

// In place on `blocks` row-major T x T blocks ([blocks*T, T]): row i of each block becomes
//   P[i, j] = exp(scale*S[i, j] - m_i) / sum_{j' <= i} exp(scale*S[i, j'] - m_i)   for j <= i (m_i: the row maximum
// of scale*S over j <= i, so no exponent is positive), and exactly 0 for j > i. Entries above the diagonal are never
// read (they may hold anything, NaN included). Sums over 16 fixed lanes combined in double: deterministic.
// Throws UsageError for a non-finite scale.
void causal_softmax_forward(float* scores, std::size_t blocks, std::size_t T, float scale);
// dS[i, j] = scale * P[i, j] * (dP[i, j] - sum_{j' <= i} dP[i, j'] P[i, j'])  for j <= i, exactly 0 for j > i: the
// gradient with respect to the unscaled scores S of the forward above. Reads only j <= i of probs and dprobs; dscores
// may alias dprobs (in place).
void causal_softmax_backward(const float* probs, const float* dprobs, float* dscores, std::size_t blocks, std::size_t T,
                             float scale);

// The core's forward: out = causal_softmax(scale * q k^T) v per (b, h). If probs_saved is not null it receives P
// ([B*H*T, T], masked entries 0) for the backward; if it is null, nothing of size T*T per head is kept (the backward
// then recomputes P: activation recomputation of the attention core). Computed per head in blocks of query rows so that
// only the causal (lower) part of each product is formed, in single-thread OpenBLAS calls; deterministic.
void attention_forward(const float* q, const float* k, const float* v, float* out, float* probs_saved, std::size_t B,
                       std::size_t H, std::size_t T, std::size_t D, float scale);
// The core's backward from d_out [B, H, T, D]: dq, dk, dv written (not accumulated). probs is the forward's
// probs_saved, or null to recompute P from q and k (bit-identical to what the forward computed, same blocking). With
// dS = causal_softmax_backward(P, dP = d_out v^T): dv = P^T d_out, dq = dS k, dk = dS^T q.
void attention_backward(const float* q, const float* k, const float* v, const float* d_out, const float* probs,
                        float* dq, float* dk, float* dv, std::size_t B, std::size_t H, std::size_t T, std::size_t D,
                        float scale);
}  // namespace cpu

#if TENAX_HAVE_CUDA
namespace cuda {
// As the cpu:: versions on device pointers, asynchronous on `stream`. One warp per softmax row (no atomics, no
// inter-warp communication); the head permutations move 16-byte vectors when D % 4 == 0 and the pointers allow it.
void split_heads(const float* qkv, float* q, float* k, float* v, std::size_t B, std::size_t H, std::size_t T,
                 std::size_t D, void* stream);
void split_heads_backward(const float* dq, const float* dk, const float* dv, float* dqkv, std::size_t B, std::size_t H,
                          std::size_t T, std::size_t D, void* stream);
void merge_heads(const float* o, float* y, std::size_t B, std::size_t H, std::size_t T, std::size_t D, void* stream);
void merge_heads_backward(const float* dy, float* d_o, std::size_t B, std::size_t H, std::size_t T, std::size_t D,
                          void* stream);
void causal_softmax_forward(float* scores, std::size_t blocks, std::size_t T, float scale, void* stream);
void causal_softmax_backward(const float* probs, const float* dprobs, float* dscores, std::size_t blocks, std::size_t T,
                             float scale, void* stream);

// The core composed of strided-batched cuBLAS products over the B*H heads (full T x T products: the masked half is
// computed and then zeroed by the softmax) and the kernels above. input_dtype F32: fp32 products without TF32;
// BF16 or F16: q, k, v, P, d_out and dS are rounded to that type into the workspace and multiplied on tensor cores with
// fp32 accumulation (batched_gemm_lowp); the softmax and every output stay fp32. `workspace` must hold
// attention_*_workspace_bytes(...) bytes (device memory, 256-byte aligned, ordered on `stream`); `handle` is a cuBLAS
// handle (create_blas_handle), used from one thread at a time. probs_saved / probs as in the cpu:: versions.
std::size_t attention_forward_workspace_bytes(std::size_t B, std::size_t H, std::size_t T, std::size_t D,
                                              DType input_dtype, bool probs_saved);
std::size_t attention_backward_workspace_bytes(std::size_t B, std::size_t H, std::size_t T, std::size_t D,
                                               DType input_dtype, bool probs_saved);
void attention_forward(const float* q, const float* k, const float* v, float* out, float* probs_saved, std::size_t B,
                       std::size_t H, std::size_t T, std::size_t D, float scale, DType input_dtype, void* workspace,
                       std::size_t workspace_bytes, void* stream, void* handle);
void attention_backward(const float* q, const float* k, const float* v, const float* d_out, const float* probs,
                        float* dq, float* dk, float* dv, std::size_t B, std::size_t H, std::size_t T, std::size_t D,
                        float scale, DType input_dtype, void* workspace, std::size_t workspace_bytes, void* stream,
                        void* handle);
}  // namespace cuda
#endif

}  // namespace tenax::kernels
