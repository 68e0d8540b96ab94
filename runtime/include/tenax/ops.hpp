// The kernels a model uses: tenax's one public kernel API, the same in every build. Each call is dispatched on an
// ExecutionContext (tenax/execution.hpp): on the host it is exactly the CPU reference kernel (bit for bit), on a CUDA
// context the CUDA kernel enqueued on the context's stream. Every pointer must live in the context's memory. The
// kernels themselves are the kernels library's internals (kernels/internal/tenax/kernels/, named next to each
// function for their full semantics, aliasing rules and validation); the argument types are tenax/kernels/params.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tenax/dtype.hpp"
#include "tenax/execution.hpp"
#include "tenax/kernels/params.hpp"

namespace tenax::ops {

using kernels::Trans;

// kernels/gemm.hpp: fp32 C = alpha op(A) op(B) + beta C (OpenBLAS / cuBLAS without TF32).
void gemm(ExecutionContext& ctx, Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc);

// The matrix product of a layer whose model weights are stored in `input_dtype` (the precision policy's). On a CUDA
// context with a 16-bit input_dtype the operands are taken in that format (a_lowp / b_lowp when the caller already has
// the 16-bit copy, such as the weights the optimizer writes; otherwise a and b are rounded into the context's
// workspace) and multiplied on tensor cores with fp32 accumulation into the fp32 C (kernels::cuda::gemm_lowp). In
// every other case it is gemm() on the fp32 operands (the CPU path computes in fp32; a_lowp and b_lowp are ignored).
void gemm_mixed(ExecutionContext& ctx, DType input_dtype, Trans ta, Trans tb, std::size_t m, std::size_t n,
                std::size_t k, float alpha, const float* a, const void* a_lowp, std::size_t lda, const float* b,
                const void* b_lowp, std::size_t ldb, float beta, float* c, std::size_t ldc);

// The two products of a linear layer's backward, which read the same output gradient dy [rows x out, row stride
// ld_dy]: dw[out x in] += dy^T x (x [rows x in]), then, if dx is not null, dx[rows x in] = dy w (w [out x in], its
// 16-bit copy w_lowp or null). The same as those two gemm_mixed calls, except that on a CUDA context with a BF16/F16
// input_dtype dy is rounded once for both products instead of once for each.
void linear_backward_mixed(ExecutionContext& ctx, DType input_dtype, std::size_t rows, std::size_t in, std::size_t out,
                           const float* dy, std::size_t ld_dy, const float* x, const float* w, const void* w_lowp,
                           float* dw, float* dx);

// kernels/batched_gemm.hpp: C_i = alpha op(A_i) op(B_i) + beta C_i over `batch` matrices at the given element strides.
void batched_gemm(ExecutionContext& ctx, Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
                  const float* a, std::size_t lda, std::size_t stride_a, const float* b, std::size_t ldb,
                  std::size_t stride_b, float beta, float* c, std::size_t ldc, std::size_t stride_c, std::size_t batch);
// As gemm_mixed for a strided batch: on a CUDA context with a BF16/F16 input_dtype, the spans of a and b the batch
// reads are rounded into the context's workspace and multiplied on tensor cores with fp32 accumulation
// (kernels::cuda::batched_gemm_lowp); otherwise batched_gemm() in fp32.
void batched_gemm_mixed(ExecutionContext& ctx, DType input_dtype, Trans ta, Trans tb, std::size_t m, std::size_t n,
                        std::size_t k, float alpha, const float* a, std::size_t lda, std::size_t stride_a,
                        const float* b, std::size_t ldb, std::size_t stride_b, float beta, float* c, std::size_t ldc,
                        std::size_t stride_c, std::size_t batch);

// kernels/attention.hpp (layout convention there): B sequences of T tokens, H heads of size D on this rank.
// qkv [B*T, 3*H*D] <-> q, k, v [B, H, T, D];  o [B, H, T, D] <-> y [B*T, H*D].
void split_heads(ExecutionContext& ctx, const float* qkv, float* q, float* k, float* v, std::size_t B, std::size_t H,
                 std::size_t T, std::size_t D);
void split_heads_backward(ExecutionContext& ctx, const float* dq, const float* dk, const float* dv, float* dqkv,
                          std::size_t B, std::size_t H, std::size_t T, std::size_t D);
void merge_heads(ExecutionContext& ctx, const float* o, float* y, std::size_t B, std::size_t H, std::size_t T,
                 std::size_t D);
void merge_heads_backward(ExecutionContext& ctx, const float* dy, float* d_o, std::size_t B, std::size_t H,
                          std::size_t T, std::size_t D);
// In place on [blocks*T, T]: P = causal softmax of scale * S (masked entries 0); dS = scale * P (dP - rowsum(dP P)).
void causal_softmax_forward(ExecutionContext& ctx, float* scores, std::size_t blocks, std::size_t T, float scale);
void causal_softmax_backward(ExecutionContext& ctx, const float* probs, const float* dprobs, float* dscores,
                             std::size_t blocks, std::size_t T, float scale);
// The causal attention core: out = softmax(scale * q k^T, causal) v. probs_saved ([B*H*T, T], B*H*T*T floats) receives
// P for the backward, or is null to keep nothing of size T*T: the backward then recomputes P from q and k (pass null
// there too). attention_backward writes dq, dk, dv (not accumulated) from d_out. input_dtype is the precision policy's
// (as gemm_mixed): on a CUDA context BF16/F16 multiplies 16-bit copies on tensor cores with fp32 accumulation, F32 (and
// every policy on the host) computes in fp32. Device scratch comes from the context's workspace (two B*H*T*T fp32
// blocks at most, plus the 16-bit copies); the host path needs 64 * T floats of per-thread scratch.
void attention_forward(ExecutionContext& ctx, const float* q, const float* k, const float* v, float* out,
                       float* probs_saved, std::size_t B, std::size_t H, std::size_t T, std::size_t D, float scale,
                       DType input_dtype = DType::F32);
void attention_backward(ExecutionContext& ctx, const float* q, const float* k, const float* v, const float* d_out,
                        const float* probs_saved, float* dq, float* dk, float* dv, std::size_t B, std::size_t H,
                        std::size_t T, std::size_t D, float scale, DType input_dtype = DType::F32);

// cuDNN's fused flash attention for the same core (kernels/fused_attention.hpp): one kernel per direction on the
// packed QKV rows, writing the merged output y [B*T, H*D] directly, with no T x T matrix in memory. CUDA contexts and
// bf16/fp16 policies only. fused_attention_unsupported returns "" when it can run this problem here, else why not
// (always a reason on the host); the first call per problem builds cuDNN's graphs, so ask it once, at set-up.
// The forward rounds qkv (fp32 [B*T, 3*H*D]) to input_dtype into qkv16_saved (3*B*T*H*D 16-bit elements) and writes
// stats_saved (B*H*T floats); keep both for the backward, which takes the forward's y (its 16-bit rounding is exactly
// the kernel's output) and dy, and writes dqkv (fp32 [B*T, 3*H*D], not accumulated). Device scratch for the 16-bit
// copies of y, dy and dqkv and cuDNN's own workspace comes from the context's workspace.
std::string fused_attention_unsupported(ExecutionContext& ctx, std::size_t B, std::size_t H, std::size_t T,
                                        std::size_t D, float scale, DType input_dtype);
// One line for logs: the cuDNN version and whether the backward is deterministic ("" when unsupported).
std::string fused_attention_description(ExecutionContext& ctx, std::size_t B, std::size_t H, std::size_t T,
                                        std::size_t D, float scale, DType input_dtype);
void fused_attention_forward(ExecutionContext& ctx, const float* qkv, void* qkv16_saved, float* stats_saved, float* y,
                             std::size_t B, std::size_t H, std::size_t T, std::size_t D, float scale,
                             DType input_dtype);
void fused_attention_backward(ExecutionContext& ctx, const void* qkv16_saved, const float* stats_saved, const float* y,
                              const float* dy, float* dqkv, std::size_t B, std::size_t H, std::size_t T, std::size_t D,
                              float scale, DType input_dtype);

// kernels/layernorm.hpp
void layernorm_forward(ExecutionContext& ctx, const float* x, const float* gamma, const float* beta, float* y,
                       float* mean, float* rstd, std::size_t rows, std::size_t cols, float eps);
void layernorm_backward(ExecutionContext& ctx, const float* x, const float* gamma, const float* mean, const float* rstd,
                        const float* dy, float* dx, float* dgamma, float* dbeta, std::size_t rows, std::size_t cols);

// kernels/activation.hpp
void bias_gelu_forward(ExecutionContext& ctx, const float* in, const float* bias, float* out, std::size_t rows,
                       std::size_t cols);
void bias_gelu_backward(ExecutionContext& ctx, const float* in, const float* bias, const float* dout, float* din,
                        float* dbias, std::size_t rows, std::size_t cols);

// kernels/elementwise.hpp
void add_inplace(ExecutionContext& ctx, float* y, const float* x, std::size_t n);
void bias_add(ExecutionContext& ctx, float* y, const float* bias, std::size_t rows, std::size_t cols);
void bias_grad(ExecutionContext& ctx, const float* dy, float* dbias, std::size_t rows, std::size_t cols);

// kernels/embedding.hpp (on the host a token outside [0, vocab) throws UsageError; on a device it yields NaN rows)
void embedding_forward(ExecutionContext& ctx, const std::int32_t* tokens, const float* table, float* y,
                       std::size_t rows, std::size_t features, std::size_t vocab);
void embedding_backward(ExecutionContext& ctx, const std::int32_t* tokens, const float* dy, float* table_grad,
                        std::size_t rows, std::size_t features, std::size_t vocab);
void embedding_slice_forward(ExecutionContext& ctx, const std::int32_t* tokens, const float* table, float* y,
                             std::size_t rows, std::size_t features, std::size_t vocab, std::size_t vocab_begin,
                             std::size_t vocab_local);
void embedding_slice_backward(ExecutionContext& ctx, const std::int32_t* tokens, const float* dy, float* table_grad,
                              std::size_t rows, std::size_t features, std::size_t vocab_begin, std::size_t vocab_local);

// kernels/cast.hpp
void cast_to_f32(ExecutionContext& ctx, const void* in, DType in_type, float* out, std::size_t n);
void cast_from_f32(ExecutionContext& ctx, const float* in, void* out, DType out_type, std::size_t n);
// Rounds n fp32 values in place to `dtype` (tenax/precision.hpp round_to_dtype), through the context's workspace.
void round_to_dtype(ExecutionContext& ctx, float* values, std::size_t n, DType dtype);

// kernels/unscale.hpp (found_nonfinite in the context's memory)
void unscale_and_check(ExecutionContext& ctx, float* grad, std::size_t n, float inv_scale, float* found_nonfinite);

// kernels/optimizer.hpp
void adamw_step(ExecutionContext& ctx, float* master, float* m, float* v, const float* grad, void* lowp_out,
                DType lowp_type, std::size_t n, const kernels::AdamWParams& p);
void sgd_momentum_step(ExecutionContext& ctx, float* master, float* velocity, const float* grad, void* lowp_out,
                       DType lowp_type, std::size_t n, const kernels::SgdParams& p);

// kernels/vocab_parallel_loss.hpp. ce_finish ADDS the loss sum to *loss_sum (context memory) on both paths. ld: the row
// stride of logits and dlogits (0: vocab_local).
void ce_row_max(ExecutionContext& ctx, const float* logits, std::size_t rows, std::size_t vocab_local, float* row_max,
                std::size_t ld = 0);
void ce_row_sums(ExecutionContext& ctx, const float* logits, const std::int32_t* targets, std::size_t rows,
                 std::size_t vocab_local, std::size_t vocab_begin, const float* row_max, double* sums,
                 std::size_t ld = 0);
void ce_finish(ExecutionContext& ctx, const float* logits, const std::int32_t* targets, float* dlogits,
               std::size_t rows, std::size_t vocab_local, std::size_t vocab_begin, std::size_t vocab,
               const float* row_max, const double* sums, float grad_scale, double* loss_sum, std::size_t ld = 0);

}  // namespace tenax::ops
