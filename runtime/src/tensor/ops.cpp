// The one place where a kernel call chooses between the CPU reference and the CUDA implementation: the host branch is
// the CPU kernel called exactly as before dispatch existed (the CPU path stays bit for bit what it was); the device
// branch passes the context's stream (and cuBLAS handle).
#include "tenax/ops.hpp"

#include <stdexcept>
#include <vector>

#include "tenax/build_config.hpp"
#include "tenax/kernels/activation.hpp"
#include "tenax/kernels/attention.hpp"
#include "tenax/kernels/batched_gemm.hpp"
#include "tenax/kernels/cast.hpp"
#include "tenax/kernels/elementwise.hpp"
#include "tenax/kernels/embedding.hpp"
#include "tenax/kernels/gemm.hpp"
#include "tenax/kernels/layernorm.hpp"
#include "tenax/kernels/optimizer.hpp"
#include "tenax/kernels/unscale.hpp"
#include "tenax/kernels/vocab_parallel_loss.hpp"
#include "tensor/op_profiler.hpp"

namespace tenax::ops {
namespace {

// A device context exists only in a CUDA build (ExecutionContext::cuda throws elsewhere); reaching a device branch
// without CUDA is a programming error.
[[noreturn]] [[maybe_unused]] void no_cuda() {
  throw std::logic_error("tenax::ops: a device context in a build without CUDA");
}

#if TENAX_HAVE_CUDA
#define TENAX_DEVICE_CALL(call) \
  do {                          \
    ctx.activate();             \
    call;                       \
  } while (0)
#else
#define TENAX_DEVICE_CALL(call) no_cuda()
#endif

using detail::op_key;
using detail::OpKey;
using detail::OpScope;

// The op profile's counts (tenax/op_profile.hpp): floating-point operations of products, and for the memory-bound
// kernels the bytes they must move at least (fp32 elements read and written once).
double f(std::size_t x) {
  return static_cast<double>(x);
}

OpKey product_key(const char* op, Trans ta, Trans tb, std::initializer_list<std::size_t> dims,
                  DType input_dtype = DType::F32) {
  OpKey key = detail::with_dtype(op_key(op, dims), input_dtype);
  key.ta = ta == Trans::Yes ? 'T' : 'N';
  key.tb = tb == Trans::Yes ? 'T' : 'N';
  return key;
}

// The attention core computes in the 16-bit format only on a device.
OpKey attention_key(const char* op, std::size_t B, std::size_t H, std::size_t T, std::size_t D, DType input_dtype,
                    const ExecutionContext& ctx) {
  return detail::with_dtype(op_key(op, {B, H, T, D}), ctx.on_device() ? input_dtype : DType::F32);
}

double lowp_bytes(const void* lowp_out, DType lowp_type) {
  return lowp_out == nullptr ? 0.0 : f(dtype_size(lowp_type));
}

#if TENAX_HAVE_CUDA
// Elements a stored [rows x cols] matrix with row stride ld spans: whole strides for every row but the last, which ends
// at its last column (reading a full stride there would run past the caller's buffer when the stride exceeds the
// width).
std::size_t spanned(std::size_t rows, std::size_t cols, std::size_t ld) {
  return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols;
}

// Rounded copies that share one workspace request each start 256-byte aligned (what cuBLAS prefers).
std::size_t aligned_256(std::size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// One product of 16-bit copies on tensor cores with fp32 accumulation: a "gemm_mixed" row of the op profile (the casts
// that made the copies are rows of their own).
void lowp_product(ExecutionContext& ctx, DType input_dtype, Trans ta, Trans tb, std::size_t m, std::size_t n,
                  std::size_t k, float alpha, const void* a, std::size_t lda, const void* b, std::size_t ldb,
                  float beta, float* c, std::size_t ldc) {
  const OpScope profiled(ctx, product_key("gemm_mixed", ta, tb, {m, n, k}, input_dtype), 2 * f(m) * f(n) * f(k));
  ctx.activate();
  kernels::cuda::gemm_lowp(input_dtype, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ctx.stream(),
                           ctx.blas_handle());
}
#endif

}  // namespace

void gemm(ExecutionContext& ctx, Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  const OpScope profiled(ctx, product_key("gemm", ta, tb, {m, n, k}), 2 * f(m) * f(n) * f(k));
  if (!ctx.on_device()) return kernels::cpu::gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  TENAX_DEVICE_CALL(
      kernels::cuda::gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ctx.stream(), ctx.blas_handle()));
}

void gemm_mixed(ExecutionContext& ctx, DType input_dtype, Trans ta, Trans tb, std::size_t m, std::size_t n,
                std::size_t k, float alpha, const float* a, const void* a_lowp, std::size_t lda, const float* b,
                const void* b_lowp, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  if (!ctx.on_device() || (input_dtype != DType::BF16 && input_dtype != DType::F16))
    return gemm(ctx, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#if TENAX_HAVE_CUDA
  if (m == 0 || n == 0) return;
  // The stored matrices: A is m x k (k x m transposed) with row stride lda, B is k x n (n x k) with stride ldb.
  const std::size_t a_elems = ta == Trans::Yes ? spanned(k, m, lda) : spanned(m, k, lda);
  const std::size_t b_elems = tb == Trans::Yes ? spanned(n, k, ldb) : spanned(k, n, ldb);
  const std::size_t elem = dtype_size(input_dtype);
  const std::size_t a_bytes = a_lowp == nullptr ? aligned_256(a_elems * elem) : 0;
  const std::size_t b_bytes = b_lowp == nullptr ? b_elems * elem : 0;
  if (a_bytes + b_bytes > 0) {
    auto* space = static_cast<unsigned char*>(ctx.workspace(a_bytes + b_bytes));
    if (a_lowp == nullptr) {
      cast_from_f32(ctx, a, space, input_dtype, a_elems);
      a_lowp = space;
    }
    if (b_lowp == nullptr) {
      cast_from_f32(ctx, b, space + a_bytes, input_dtype, b_elems);
      b_lowp = space + a_bytes;
    }
  }
  lowp_product(ctx, input_dtype, ta, tb, m, n, k, alpha, a_lowp, lda, b_lowp, ldb, beta, c, ldc);
#else
  (void)a_lowp;
  (void)b_lowp;
  no_cuda();
#endif
}

void linear_backward_mixed(ExecutionContext& ctx, DType input_dtype, std::size_t rows, std::size_t in, std::size_t out,
                           const float* dy, std::size_t ld_dy, const float* x, const float* w, const void* w_lowp,
                           float* dw, float* dx) {
  const bool lowp = ctx.on_device() && (input_dtype == DType::BF16 || input_dtype == DType::F16);
  if (!lowp || rows == 0 || in == 0 || out == 0) {
    gemm_mixed(ctx, input_dtype, Trans::Yes, Trans::No, out, in, rows, 1.0f, dy, nullptr, ld_dy, x, nullptr, in, 1.0f,
               dw, in);
    if (dx != nullptr)
      gemm_mixed(ctx, input_dtype, Trans::No, Trans::No, rows, in, out, 1.0f, dy, nullptr, ld_dy, w, w_lowp, in, 0.0f,
                 dx, in);
    return;
  }
#if TENAX_HAVE_CUDA
  // dy, x and (when the caller has no 16-bit copy) w rounded into one workspace request. gemm_lowp checks the strides.
  const std::size_t elem = dtype_size(input_dtype), dy_elems = spanned(rows, out, ld_dy);
  const std::size_t dy_bytes = aligned_256(dy_elems * elem), x_bytes = aligned_256(rows * in * elem);
  const bool round_w = dx != nullptr && w_lowp == nullptr;
  auto* space = static_cast<unsigned char*>(ctx.workspace(dy_bytes + x_bytes + (round_w ? out * in * elem : 0)));
  cast_from_f32(ctx, dy, space, input_dtype, dy_elems);
  cast_from_f32(ctx, x, space + dy_bytes, input_dtype, rows * in);
  if (round_w) {
    cast_from_f32(ctx, w, space + dy_bytes + x_bytes, input_dtype, out * in);
    w_lowp = space + dy_bytes + x_bytes;
  }
  lowp_product(ctx, input_dtype, Trans::Yes, Trans::No, out, in, rows, 1.0f, space, ld_dy, space + dy_bytes, in, 1.0f,
               dw, in);
  if (dx != nullptr)
    lowp_product(ctx, input_dtype, Trans::No, Trans::No, rows, in, out, 1.0f, space, ld_dy, w_lowp, in, 0.0f, dx, in);
#else
  (void)w_lowp;
  no_cuda();
#endif
}

void batched_gemm(ExecutionContext& ctx, Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
                  const float* a, std::size_t lda, std::size_t stride_a, const float* b, std::size_t ldb,
                  std::size_t stride_b, float beta, float* c, std::size_t ldc, std::size_t stride_c,
                  std::size_t batch) {
  const OpScope profiled(ctx, product_key("batched_gemm", ta, tb, {batch, m, n, k}), 2 * f(batch) * f(m) * f(n) * f(k));
  if (!ctx.on_device())
    return kernels::cpu::batched_gemm(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                                      stride_c, batch);
  TENAX_DEVICE_CALL(kernels::cuda::batched_gemm(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c,
                                                ldc, stride_c, batch, ctx.stream(), ctx.blas_handle()));
}

void batched_gemm_mixed(ExecutionContext& ctx, DType input_dtype, Trans ta, Trans tb, std::size_t m, std::size_t n,
                        std::size_t k, float alpha, const float* a, std::size_t lda, std::size_t stride_a,
                        const float* b, std::size_t ldb, std::size_t stride_b, float beta, float* c, std::size_t ldc,
                        std::size_t stride_c, std::size_t batch) {
  if (!ctx.on_device() || (input_dtype != DType::BF16 && input_dtype != DType::F16))
    return batched_gemm(ctx, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch);
  const OpScope profiled(ctx, product_key("batched_gemm_mixed", ta, tb, {batch, m, n, k}, input_dtype),
                         2 * f(batch) * f(m) * f(n) * f(k));
#if TENAX_HAVE_CUDA
  // Every size and stride is checked before anything is rounded (the spans below depend on them).
  const kernels::BatchedGemmSpans spans =
      kernels::batched_gemm_spans(ta, tb, m, n, k, lda, stride_a, ldb, stride_b, ldc, stride_c, batch);
  if (spans.c == 0) return;
  // The rounded a and b share one workspace request; b starts 256-byte aligned (what cuBLAS prefers). The spans fit
  // in 64 bits as element counts; as 2-byte copies they are bounded by the fp32 operands the caller holds.
  const std::size_t elem = dtype_size(input_dtype);
  const std::size_t a_bytes = aligned_256(spans.a * elem);
  auto* space = static_cast<unsigned char*>(ctx.workspace(a_bytes + spans.b * elem));
  cast_from_f32(ctx, a, space, input_dtype, spans.a);
  cast_from_f32(ctx, b, space + a_bytes, input_dtype, spans.b);
  ctx.activate();
  kernels::cuda::batched_gemm_lowp(input_dtype, ta, tb, m, n, k, alpha, space, lda, stride_a, space + a_bytes, ldb,
                                   stride_b, beta, c, ldc, stride_c, batch, ctx.stream(), ctx.blas_handle());
#else
  no_cuda();
#endif
}

void split_heads(ExecutionContext& ctx, const float* qkv, float* q, float* k, float* v, std::size_t B, std::size_t H,
                 std::size_t T, std::size_t D) {
  const OpScope profiled(ctx, op_key("split_heads", {B, H, T, D}), 0, 24 * f(B) * f(H) * f(T) * f(D));
  if (!ctx.on_device()) return kernels::cpu::split_heads(qkv, q, k, v, B, H, T, D);
  TENAX_DEVICE_CALL(kernels::cuda::split_heads(qkv, q, k, v, B, H, T, D, ctx.stream()));
}

void split_heads_backward(ExecutionContext& ctx, const float* dq, const float* dk, const float* dv, float* dqkv,
                          std::size_t B, std::size_t H, std::size_t T, std::size_t D) {
  const OpScope profiled(ctx, op_key("split_heads_backward", {B, H, T, D}), 0, 24 * f(B) * f(H) * f(T) * f(D));
  if (!ctx.on_device()) return kernels::cpu::split_heads_backward(dq, dk, dv, dqkv, B, H, T, D);
  TENAX_DEVICE_CALL(kernels::cuda::split_heads_backward(dq, dk, dv, dqkv, B, H, T, D, ctx.stream()));
}

void merge_heads(ExecutionContext& ctx, const float* o, float* y, std::size_t B, std::size_t H, std::size_t T,
                 std::size_t D) {
  const OpScope profiled(ctx, op_key("merge_heads", {B, H, T, D}), 0, 8 * f(B) * f(H) * f(T) * f(D));
  if (!ctx.on_device()) return kernels::cpu::merge_heads(o, y, B, H, T, D);
  TENAX_DEVICE_CALL(kernels::cuda::merge_heads(o, y, B, H, T, D, ctx.stream()));
}

void merge_heads_backward(ExecutionContext& ctx, const float* dy, float* d_o, std::size_t B, std::size_t H,
                          std::size_t T, std::size_t D) {
  const OpScope profiled(ctx, op_key("merge_heads_backward", {B, H, T, D}), 0, 8 * f(B) * f(H) * f(T) * f(D));
  if (!ctx.on_device()) return kernels::cpu::merge_heads_backward(dy, d_o, B, H, T, D);
  TENAX_DEVICE_CALL(kernels::cuda::merge_heads_backward(dy, d_o, B, H, T, D, ctx.stream()));
}

void causal_softmax_forward(ExecutionContext& ctx, float* scores, std::size_t blocks, std::size_t T, float scale) {
  const OpScope profiled(ctx, op_key("causal_softmax_forward", {blocks, T}), 0, 8 * f(blocks) * f(T) * f(T));
  if (!ctx.on_device()) return kernels::cpu::causal_softmax_forward(scores, blocks, T, scale);
  TENAX_DEVICE_CALL(kernels::cuda::causal_softmax_forward(scores, blocks, T, scale, ctx.stream()));
}

void causal_softmax_backward(ExecutionContext& ctx, const float* probs, const float* dprobs, float* dscores,
                             std::size_t blocks, std::size_t T, float scale) {
  const OpScope profiled(ctx, op_key("causal_softmax_backward", {blocks, T}), 0, 12 * f(blocks) * f(T) * f(T));
  if (!ctx.on_device()) return kernels::cpu::causal_softmax_backward(probs, dprobs, dscores, blocks, T, scale);
  TENAX_DEVICE_CALL(kernels::cuda::causal_softmax_backward(probs, dprobs, dscores, blocks, T, scale, ctx.stream()));
}

// The host core computes in fp32 whatever the policy (input_dtype is the device path's), like gemm_mixed.
void attention_forward(ExecutionContext& ctx, const float* q, const float* k, const float* v, float* out,
                       float* probs_saved, std::size_t B, std::size_t H, std::size_t T, std::size_t D, float scale,
                       DType input_dtype) {
  const OpScope profiled(ctx, attention_key("attention_forward", B, H, T, D, input_dtype, ctx),
                         detail::causal_attention_flops(B, H, T, D));
  if (!ctx.on_device()) return kernels::cpu::attention_forward(q, k, v, out, probs_saved, B, H, T, D, scale);
#if TENAX_HAVE_CUDA
  // Sizes and the dtype are checked here, before the workspace grows.
  const std::size_t bytes =
      kernels::cuda::attention_forward_workspace_bytes(B, H, T, D, input_dtype, probs_saved != nullptr);
  void* space = bytes > 0 ? ctx.workspace(bytes) : nullptr;
  ctx.activate();
  kernels::cuda::attention_forward(q, k, v, out, probs_saved, B, H, T, D, scale, input_dtype, space, bytes,
                                   ctx.stream(), ctx.blas_handle());
#else
  (void)input_dtype;
  no_cuda();
#endif
}

void attention_backward(ExecutionContext& ctx, const float* q, const float* k, const float* v, const float* d_out,
                        const float* probs_saved, float* dq, float* dk, float* dv, std::size_t B, std::size_t H,
                        std::size_t T, std::size_t D, float scale, DType input_dtype) {
  const OpScope profiled(ctx, attention_key("attention_backward", B, H, T, D, input_dtype, ctx),
                         2 * detail::causal_attention_flops(B, H, T, D));
  if (!ctx.on_device())
    return kernels::cpu::attention_backward(q, k, v, d_out, probs_saved, dq, dk, dv, B, H, T, D, scale);
#if TENAX_HAVE_CUDA
  const std::size_t bytes =
      kernels::cuda::attention_backward_workspace_bytes(B, H, T, D, input_dtype, probs_saved != nullptr);
  void* space = bytes > 0 ? ctx.workspace(bytes) : nullptr;
  ctx.activate();
  kernels::cuda::attention_backward(q, k, v, d_out, probs_saved, dq, dk, dv, B, H, T, D, scale, input_dtype, space,
                                    bytes, ctx.stream(), ctx.blas_handle());
#else
  (void)input_dtype;
  no_cuda();
#endif
}

void layernorm_forward(ExecutionContext& ctx, const float* x, const float* gamma, const float* beta, float* y,
                       float* mean, float* rstd, std::size_t rows, std::size_t cols, float eps) {
  const OpScope profiled(ctx, op_key("layernorm_forward", {rows, cols}), 0, 8 * f(rows) * f(cols));
  if (!ctx.on_device()) return kernels::cpu::layernorm_forward(x, gamma, beta, y, mean, rstd, rows, cols, eps);
  TENAX_DEVICE_CALL(kernels::cuda::layernorm_forward(x, gamma, beta, y, mean, rstd, rows, cols, eps, ctx.stream()));
}

void layernorm_backward(ExecutionContext& ctx, const float* x, const float* gamma, const float* mean, const float* rstd,
                        const float* dy, float* dx, float* dgamma, float* dbeta, std::size_t rows, std::size_t cols) {
  const OpScope profiled(ctx, op_key("layernorm_backward", {rows, cols}), 0, 12 * f(rows) * f(cols));
  if (!ctx.on_device())
    return kernels::cpu::layernorm_backward(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, rows, cols);
  TENAX_DEVICE_CALL(
      kernels::cuda::layernorm_backward(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, rows, cols, ctx.stream()));
}

void bias_gelu_forward(ExecutionContext& ctx, const float* in, const float* bias, float* out, std::size_t rows,
                       std::size_t cols) {
  const OpScope profiled(ctx, op_key("bias_gelu_forward", {rows, cols}), 0, 8 * f(rows) * f(cols));
  if (!ctx.on_device()) return kernels::cpu::bias_gelu_forward(in, bias, out, rows, cols);
  TENAX_DEVICE_CALL(kernels::cuda::bias_gelu_forward(in, bias, out, rows, cols, ctx.stream()));
}

void bias_gelu_backward(ExecutionContext& ctx, const float* in, const float* bias, const float* dout, float* din,
                        float* dbias, std::size_t rows, std::size_t cols) {
  const OpScope profiled(ctx, op_key("bias_gelu_backward", {rows, cols}), 0, 12 * f(rows) * f(cols));
  if (!ctx.on_device()) return kernels::cpu::bias_gelu_backward(in, bias, dout, din, dbias, rows, cols);
  TENAX_DEVICE_CALL(kernels::cuda::bias_gelu_backward(in, bias, dout, din, dbias, rows, cols, ctx.stream()));
}

void add_inplace(ExecutionContext& ctx, float* y, const float* x, std::size_t n) {
  const OpScope profiled(ctx, op_key("add_inplace", {n}), 0, 12 * f(n));
  if (!ctx.on_device()) return kernels::cpu::add_inplace(y, x, n);
  TENAX_DEVICE_CALL(kernels::cuda::add_inplace(y, x, n, ctx.stream()));
}

void bias_add(ExecutionContext& ctx, float* y, const float* bias, std::size_t rows, std::size_t cols) {
  const OpScope profiled(ctx, op_key("bias_add", {rows, cols}), 0, 8 * f(rows) * f(cols));
  if (!ctx.on_device()) return kernels::cpu::bias_add(y, bias, rows, cols);
  TENAX_DEVICE_CALL(kernels::cuda::bias_add(y, bias, rows, cols, ctx.stream()));
}

void bias_grad(ExecutionContext& ctx, const float* dy, float* dbias, std::size_t rows, std::size_t cols) {
  const OpScope profiled(ctx, op_key("bias_grad", {rows, cols}), 0, 4 * f(rows) * f(cols));
  if (!ctx.on_device()) return kernels::cpu::bias_grad(dy, dbias, rows, cols);
  TENAX_DEVICE_CALL(kernels::cuda::bias_grad(dy, dbias, rows, cols, ctx.stream()));
}

void embedding_forward(ExecutionContext& ctx, const std::int32_t* tokens, const float* table, float* y,
                       std::size_t rows, std::size_t features, std::size_t vocab) {
  const OpScope profiled(ctx, op_key("embedding_forward", {rows, features}), 0, 8 * f(rows) * f(features));
  if (!ctx.on_device()) return kernels::cpu::embedding_forward(tokens, table, y, rows, features, vocab);
  TENAX_DEVICE_CALL(kernels::cuda::embedding_forward(tokens, table, y, rows, features, vocab, ctx.stream()));
}

void embedding_backward(ExecutionContext& ctx, const std::int32_t* tokens, const float* dy, float* table_grad,
                        std::size_t rows, std::size_t features, std::size_t vocab) {
  const OpScope profiled(ctx, op_key("embedding_backward", {rows, features}), 0, 12 * f(rows) * f(features));
  if (!ctx.on_device()) return kernels::cpu::embedding_backward(tokens, dy, table_grad, rows, features);
  TENAX_DEVICE_CALL(kernels::cuda::embedding_backward(tokens, dy, table_grad, rows, features, vocab, ctx.stream()));
}

void embedding_slice_forward(ExecutionContext& ctx, const std::int32_t* tokens, const float* table, float* y,
                             std::size_t rows, std::size_t features, std::size_t vocab, std::size_t vocab_begin,
                             std::size_t vocab_local) {
  const OpScope profiled(ctx, op_key("embedding_slice_forward", {rows, features}), 0, 8 * f(rows) * f(features));
  if (!ctx.on_device())
    return kernels::cpu::embedding_slice_forward(tokens, table, y, rows, features, vocab, vocab_begin, vocab_local);
  TENAX_DEVICE_CALL(kernels::cuda::embedding_slice_forward(tokens, table, y, rows, features, vocab, vocab_begin,
                                                           vocab_local, ctx.stream()));
}

void embedding_slice_backward(ExecutionContext& ctx, const std::int32_t* tokens, const float* dy, float* table_grad,
                              std::size_t rows, std::size_t features, std::size_t vocab_begin,
                              std::size_t vocab_local) {
  const OpScope profiled(ctx, op_key("embedding_slice_backward", {rows, features}), 0, 12 * f(rows) * f(features));
  if (!ctx.on_device())
    return kernels::cpu::embedding_slice_backward(tokens, dy, table_grad, rows, features, vocab_begin, vocab_local);
  TENAX_DEVICE_CALL(kernels::cuda::embedding_slice_backward(tokens, dy, table_grad, rows, features, vocab_begin,
                                                            vocab_local, ctx.stream()));
}

void cast_to_f32(ExecutionContext& ctx, const void* in, DType in_type, float* out, std::size_t n) {
  const OpScope profiled(ctx, detail::with_dtype(op_key("cast_to_f32", {n}), in_type), 0,
                         (f(dtype_size(in_type)) + 4) * f(n));
  if (!ctx.on_device()) return kernels::cpu::cast_to_f32(in, in_type, out, n);
  TENAX_DEVICE_CALL(kernels::cuda::cast_to_f32(in, in_type, out, n, ctx.stream()));
}

void cast_from_f32(ExecutionContext& ctx, const float* in, void* out, DType out_type, std::size_t n) {
  const OpScope profiled(ctx, detail::with_dtype(op_key("cast_from_f32", {n}), out_type), 0,
                         (f(dtype_size(out_type)) + 4) * f(n));
  if (!ctx.on_device()) return kernels::cpu::cast_from_f32(in, out, out_type, n);
  TENAX_DEVICE_CALL(kernels::cuda::cast_from_f32(in, out, out_type, n, ctx.stream()));
}

void round_to_dtype(ExecutionContext& ctx, float* values, std::size_t n, DType dtype) {
  if (dtype == DType::F32 || n == 0) return;
  if (!ctx.on_device()) {
    // A per-thread scratch rather than the host context's workspace: the host context is shared by the whole process.
    thread_local std::vector<std::uint16_t> host_scratch;
    host_scratch.resize(n);
    cast_from_f32(ctx, values, host_scratch.data(), dtype, n);
    cast_to_f32(ctx, host_scratch.data(), dtype, values, n);
    return;
  }
  void* scratch = ctx.workspace(n * dtype_size(dtype));
  cast_from_f32(ctx, values, scratch, dtype, n);
  cast_to_f32(ctx, scratch, dtype, values, n);
}

void unscale_and_check(ExecutionContext& ctx, float* grad, std::size_t n, float inv_scale, float* found_nonfinite) {
  const OpScope profiled(ctx, op_key("unscale_and_check", {n}), 0, 8 * f(n));
  if (!ctx.on_device()) return kernels::cpu::unscale_and_check(grad, n, inv_scale, found_nonfinite);
  TENAX_DEVICE_CALL(kernels::cuda::unscale_and_check(grad, n, inv_scale, found_nonfinite, ctx.stream()));
}

void adamw_step(ExecutionContext& ctx, float* master, float* m, float* v, const float* grad, void* lowp_out,
                DType lowp_type, std::size_t n, const kernels::AdamWParams& p) {
  const OpScope profiled(ctx, op_key("adamw_step", {n}), 0, (28 + lowp_bytes(lowp_out, lowp_type)) * f(n));
  if (!ctx.on_device()) return kernels::cpu::adamw_step(master, m, v, grad, lowp_out, lowp_type, n, p);
  TENAX_DEVICE_CALL(kernels::cuda::adamw_step(master, m, v, grad, lowp_out, lowp_type, n, p, ctx.stream()));
}

void sgd_momentum_step(ExecutionContext& ctx, float* master, float* velocity, const float* grad, void* lowp_out,
                       DType lowp_type, std::size_t n, const kernels::SgdParams& p) {
  const OpScope profiled(ctx, op_key("sgd_momentum_step", {n}), 0, (20 + lowp_bytes(lowp_out, lowp_type)) * f(n));
  if (!ctx.on_device()) return kernels::cpu::sgd_momentum_step(master, velocity, grad, lowp_out, lowp_type, n, p);
  TENAX_DEVICE_CALL(kernels::cuda::sgd_momentum_step(master, velocity, grad, lowp_out, lowp_type, n, p, ctx.stream()));
}

void ce_row_max(ExecutionContext& ctx, const float* logits, std::size_t rows, std::size_t vocab_local, float* row_max,
                std::size_t ld) {
  const OpScope profiled(ctx, op_key("ce_row_max", {rows, vocab_local}), 0, 4 * f(rows) * f(vocab_local));
  if (!ctx.on_device()) return kernels::cpu::ce_row_max(logits, rows, vocab_local, row_max, ld);
  TENAX_DEVICE_CALL(kernels::cuda::ce_row_max(logits, rows, vocab_local, row_max, ctx.stream(), ld));
}

void ce_row_sums(ExecutionContext& ctx, const float* logits, const std::int32_t* targets, std::size_t rows,
                 std::size_t vocab_local, std::size_t vocab_begin, const float* row_max, double* sums, std::size_t ld) {
  const OpScope profiled(ctx, op_key("ce_row_sums", {rows, vocab_local}), 0, 4 * f(rows) * f(vocab_local));
  if (!ctx.on_device())
    return kernels::cpu::ce_row_sums(logits, targets, rows, vocab_local, vocab_begin, row_max, sums, ld);
  TENAX_DEVICE_CALL(
      kernels::cuda::ce_row_sums(logits, targets, rows, vocab_local, vocab_begin, row_max, sums, ctx.stream(), ld));
}

void ce_finish(ExecutionContext& ctx, const float* logits, const std::int32_t* targets, float* dlogits,
               std::size_t rows, std::size_t vocab_local, std::size_t vocab_begin, std::size_t vocab,
               const float* row_max, const double* sums, float grad_scale, double* loss_sum, std::size_t ld) {
  const OpScope profiled(ctx, op_key("ce_finish", {rows, vocab_local}), 0, 8 * f(rows) * f(vocab_local));
  if (!ctx.on_device()) {
    *loss_sum += kernels::cpu::ce_finish(logits, targets, dlogits, rows, vocab_local, vocab_begin, row_max, sums,
                                         grad_scale, ld);
    return;
  }
  TENAX_DEVICE_CALL(kernels::cuda::ce_finish(logits, targets, dlogits, rows, vocab_local, vocab_begin, vocab, row_max,
                                             sums, grad_scale, loss_sum, ctx.stream(), ld));
}

}  // namespace tenax::ops
