// The causal attention core on a GPU, composed of strided-batched cuBLAS products over the B*H heads and the softmax
// kernels of attention.cu, all enqueued on one stream. Host code only (no device code to compile).
//
// Unlike the CPU core, the products are the full T x T ones: half of S = Q K^T and dP = dO V^T is computed for masked
// entries, which the softmax kernels never read and set to 0 in P and dS. A fused attention kernel (cuDNN's, or a
// flash-attention kernel) would skip them and the T x T memory; see docs/gpu-path.md.
#include <initializer_list>
#include <string>
#include <utility>

#include "common/attention_validate.hpp"
#include "tenax/kernels/attention.hpp"
#include "tenax/kernels/batched_gemm.hpp"
#include "tenax/kernels/cast.hpp"

namespace tenax::kernels::cuda {
namespace {

bool is_lowp(const char* op, DType t) {
  if (t == DType::F32) return false;
  if (t == DType::BF16 || t == DType::F16) return true;
  detail::usage_error(op, "input_dtype is " + std::string(dtype_name(t)) + "; use f32, bf16 or f16");
}

// Byte offsets of the scratch buffers in the workspace, each 256-byte aligned (what cuBLAS prefers). A buffer that is
// not needed keeps kNone.
struct Plan {
  static constexpr std::size_t kNone = ~std::size_t{0};
  std::size_t probs = kNone;   // fp32 P when the caller does not keep it
  std::size_t dprobs = kNone;  // fp32 dP, then dS in place (backward)
  std::size_t q16 = kNone, k16 = kNone, v16 = kNone, dout16 = kNone;
  std::size_t p16 = kNone;  // 16-bit P, then 16-bit dS (backward, after dV no longer needs P)
  std::size_t bytes = 0;
};

// attention_dims bounds every count by 2^64 / 16 bytes, so these sums of at most 2 * 4 + 2 + 4 * 2 bytes per element
// cannot overflow.
Plan plan(const detail::AttentionDims& d, bool lowp, bool backward, bool probs_saved) {
  Plan p;
  auto take = [&](std::size_t bytes) {
    const std::size_t at = p.bytes;
    p.bytes += (bytes + 255) / 256 * 256;
    return at;
  };
  if (!probs_saved) p.probs = take(d.score_elems * sizeof(float));
  if (backward) p.dprobs = take(d.score_elems * sizeof(float));
  if (lowp) {
    p.q16 = take(d.head_elems * 2);
    p.k16 = take(d.head_elems * 2);
    p.v16 = take(d.head_elems * 2);
    if (backward) p.dout16 = take(d.head_elems * 2);
    p.p16 = take(d.score_elems * 2);
  }
  return p;
}

// Issues the core's products in fp32 or on 16-bit copies, over the B*H heads: every operand is a [T, D] or [T, T]
// matrix per head, at stride T*D or T*T.
class Core {
 public:
  Core(const detail::AttentionDims& dims, std::size_t T, std::size_t D, DType type, bool lowp, char* ws, void* stream,
       void* handle)
      : dims_(dims), T_(T), D_(D), type_(type), lowp_(lowp), ws_(ws), stream_(stream), handle_(handle) {}

  void* at(std::size_t offset) const { return ws_ + offset; }
  float* f32(std::size_t offset) const { return static_cast<float*>(at(offset)); }

  // A 16-bit copy of an fp32 tensor of `n` elements into the workspace (lowp only).
  const void* round(const float* x, std::size_t offset, std::size_t n) const {
    cast_from_f32(x, at(offset), type_, n, stream_);
    return at(offset);
  }

  // An operand: its fp32 tensor, or (lowp) its 16-bit copy; `square` says T x T (else T x D).
  struct Operand {
    const float* f32;
    const void* lowp;
    bool square;
  };

  // c = op(a) op(b) per head: rows x cols with `inner` products; c's row stride is cols.
  void product(bool a_t, bool b_t, std::size_t rows, std::size_t cols, std::size_t inner, Operand a, Operand b,
               float* c) const {
    const std::size_t lda = a.square ? T_ : D_, ldb = b.square ? T_ : D_;
    const std::size_t sa = a.square ? T_ * T_ : T_ * D_, sb = b.square ? T_ * T_ : T_ * D_;
    const std::size_t sc = rows * cols;
    const Trans ta = a_t ? Trans::Yes : Trans::No, tb = b_t ? Trans::Yes : Trans::No;
    if (lowp_)
      batched_gemm_lowp(type_, ta, tb, rows, cols, inner, 1.0f, a.lowp, lda, sa, b.lowp, ldb, sb, 0.0f, c, cols, sc,
                        dims_.heads, stream_, handle_);
    else
      batched_gemm(ta, tb, rows, cols, inner, 1.0f, a.f32, lda, sa, b.f32, ldb, sb, 0.0f, c, cols, sc, dims_.heads,
                   stream_, handle_);
  }

  // P = causal_softmax(scale * q k^T) into p (the forward, and the backward's recomputation: the same calls).
  void probabilities(const Plan& plan, const float* q, const float* k, float* p, float scale) const {
    const void* q16 = lowp_ ? round(q, plan.q16, dims_.head_elems) : nullptr;
    const void* k16 = lowp_ ? round(k, plan.k16, dims_.head_elems) : nullptr;
    product(false, true, T_, T_, D_, {q, q16, false}, {k, k16, false}, p);
    causal_softmax_forward(p, dims_.heads, T_, scale, stream_);
  }

 private:
  detail::AttentionDims dims_;
  std::size_t T_, D_;
  DType type_;
  bool lowp_;
  char* ws_;
  void* stream_;
  void* handle_;
};

detail::AttentionDims check(const char* op, std::size_t B, std::size_t H, std::size_t T, std::size_t D, float scale,
                            std::initializer_list<std::pair<const void*, const char*>> heads) {
  const detail::AttentionDims dims = detail::attention_dims(op, B, H, T, D);
  detail::require_finite_scale(op, scale);
  for (auto [p, name] : heads)
    detail::require_pointer(op, p, dims.head_elems, name);
  return dims;
}

void check_workspace(const char* op, const Plan& plan, void* workspace, std::size_t bytes) {
  if (bytes < plan.bytes)
    detail::usage_error(op, "workspace_bytes = " + std::to_string(bytes) + " but this problem needs " +
                                std::to_string(plan.bytes) + " (attention_*_workspace_bytes)");
  detail::require_pointer(op, workspace, plan.bytes, "workspace");
}

}  // namespace

std::size_t attention_forward_workspace_bytes(std::size_t B, std::size_t H, std::size_t T, std::size_t D,
                                              DType input_dtype, bool probs_saved) {
  const detail::AttentionDims dims = detail::attention_dims("attention_forward", B, H, T, D);
  return plan(dims, is_lowp("attention_forward", input_dtype), false, probs_saved).bytes;
}

std::size_t attention_backward_workspace_bytes(std::size_t B, std::size_t H, std::size_t T, std::size_t D,
                                               DType input_dtype, bool probs_saved) {
  const detail::AttentionDims dims = detail::attention_dims("attention_backward", B, H, T, D);
  return plan(dims, is_lowp("attention_backward", input_dtype), true, probs_saved).bytes;
}

void attention_forward(const float* q, const float* k, const float* v, float* out, float* probs_saved, std::size_t B,
                       std::size_t H, std::size_t T, std::size_t D, float scale, DType input_dtype, void* workspace,
                       std::size_t workspace_bytes, void* stream, void* handle) {
  const char* op = "attention_forward";
  const detail::AttentionDims dims = check(op, B, H, T, D, scale, {{q, "q"}, {k, "k"}, {v, "v"}, {out, "out"}});
  const bool lowp = is_lowp(op, input_dtype);
  if (dims.score_elems == 0 || D == 0) return;
  const Plan p = plan(dims, lowp, false, probs_saved != nullptr);
  check_workspace(op, p, workspace, workspace_bytes);
  const Core core(dims, T, D, input_dtype, lowp, static_cast<char*>(workspace), stream, handle);
  float* probs = probs_saved != nullptr ? probs_saved : core.f32(p.probs);
  core.probabilities(p, q, k, probs, scale);
  const void* p16 = lowp ? core.round(probs, p.p16, dims.score_elems) : nullptr;
  const void* v16 = lowp ? core.round(v, p.v16, dims.head_elems) : nullptr;
  core.product(false, false, T, D, T, {probs, p16, true}, {v, v16, false}, out);
}

void attention_backward(const float* q, const float* k, const float* v, const float* d_out, const float* probs,
                        float* dq, float* dk, float* dv, std::size_t B, std::size_t H, std::size_t T, std::size_t D,
                        float scale, DType input_dtype, void* workspace, std::size_t workspace_bytes, void* stream,
                        void* handle) {
  const char* op = "attention_backward";
  const detail::AttentionDims dims = check(
      op, B, H, T, D, scale, {{q, "q"}, {k, "k"}, {v, "v"}, {d_out, "d_out"}, {dq, "dq"}, {dk, "dk"}, {dv, "dv"}});
  const bool lowp = is_lowp(op, input_dtype);
  if (dims.score_elems == 0 || D == 0) return;
  const Plan p = plan(dims, lowp, true, probs != nullptr);
  check_workspace(op, p, workspace, workspace_bytes);
  const Core core(dims, T, D, input_dtype, lowp, static_cast<char*>(workspace), stream, handle);
  const bool recompute = probs == nullptr;
  if (recompute) {
    core.probabilities(p, q, k, core.f32(p.probs), scale);  // leaves q and k rounded in place when lowp
    probs = core.f32(p.probs);
  }
  const void* q16 = lowp ? (recompute ? core.at(p.q16) : core.round(q, p.q16, dims.head_elems)) : nullptr;
  const void* k16 = lowp ? (recompute ? core.at(p.k16) : core.round(k, p.k16, dims.head_elems)) : nullptr;
  const void* v16 = lowp ? core.round(v, p.v16, dims.head_elems) : nullptr;
  const void* do16 = lowp ? core.round(d_out, p.dout16, dims.head_elems) : nullptr;
  const void* p16 = lowp ? core.round(probs, p.p16, dims.score_elems) : nullptr;
  float* grad = core.f32(p.dprobs);
  // dP = dO V^T and dV = P^T dO, then dS in place of dP; the 16-bit dS takes the 16-bit P's place, no longer needed.
  core.product(false, true, T, T, D, {d_out, do16, false}, {v, v16, false}, grad);
  core.product(true, false, T, D, T, {probs, p16, true}, {d_out, do16, false}, dv);
  causal_softmax_backward(probs, grad, grad, dims.heads, T, scale, stream);
  const void* ds16 = lowp ? core.round(grad, p.p16, dims.score_elems) : nullptr;
  core.product(false, false, T, D, T, {grad, ds16, true}, {k, k16, false}, dq);
  core.product(true, false, T, D, T, {grad, ds16, true}, {q, q16, false}, dk);
}

}  // namespace tenax::kernels::cuda
