// Memory-bound element-wise kernels: casts, gradient unscale + non-finite check, the fused optimizer steps and the sum
// of squares. Each is one grid-stride pass with 16-byte vector accesses when every pointer allows it (and a scalar
// path otherwise), so its cost is the bytes it must move.
#include <cstdint>

#include "common/math.hpp"
#include "common/validate.hpp"
#include "cuda/check.hpp"
#include "cuda/device_util.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/launch.hpp"
#include "tenax/kernels/cast.hpp"
#include "tenax/kernels/optimizer.hpp"
#include "tenax/kernels/reduction.hpp"
#include "tenax/kernels/unscale.hpp"

namespace tenax::kernels::cuda {
namespace {

using detail::FloatVec;
using detail::HalfVec;
using detail::kThreads;
using detail::kVec;
using detail::launch_elementwise;

// 16-byte alignment for the float arrays and 8-byte for the 16-bit ones lets kVec = 4 elements move as one access.
bool vec_ok(const void* p, DType t) {
  return p == nullptr || detail::aligned(p, kVec * dtype_size(t));
}

enum class Lowp : int { None, F32, BF16, F16 };

Lowp lowp_kind(const void* out, DType t) {
  if (out == nullptr) return Lowp::None;
  if (t == DType::F32) return Lowp::F32;
  return t == DType::BF16 ? Lowp::BF16 : Lowp::F16;
}

template <int V>
__device__ inline void store_lowp(Lowp kind, void* out, std::size_t e, const FloatVec<V>& w) {
  if (kind == Lowp::None) return;
  if (kind == Lowp::F32) return detail::store<V>(static_cast<float*>(out), e, w);
  HalfVec<V> h;
  for (int k = 0; k < V; ++k)
    h.v[k] = detail::to_lowp16(w.v[k], kind == Lowp::BF16);
  detail::store<V>(static_cast<std::uint16_t*>(out), e, h);
}

struct WidenOp {
  const std::uint16_t* in;
  float* out;
  bool bf16;
  template <int V>
  __device__ void apply(std::size_t e) {
    const HalfVec<V> h = detail::load<V>(in, e);
    FloatVec<V> f;
    for (int k = 0; k < V; ++k)
      f.v[k] = bf16 ? bf16_bits_to_float(h.v[k]) : f16_bits_to_float(h.v[k]);
    detail::store<V>(out, e, f);
  }
  __device__ void finish() {}
};

struct NarrowOp {
  const float* in;
  std::uint16_t* out;
  bool bf16;
  template <int V>
  __device__ void apply(std::size_t e) {
    const FloatVec<V> f = detail::load<V>(in, e);
    HalfVec<V> h;
    for (int k = 0; k < V; ++k)
      h.v[k] = detail::to_lowp16(f.v[k], bf16);
    detail::store<V>(out, e, h);
  }
  __device__ void finish() {}
};

struct UnscaleOp {
  float* grad;
  float inv_scale;
  float* found_nonfinite;
  bool bad = false;
  template <int V>
  __device__ void apply(std::size_t e) {
    FloatVec<V> g = detail::load<V>(grad, e);
    for (int k = 0; k < V; ++k) {
      const float r = g.v[k] * inv_scale;
      bad |= detail::is_nonfinite(g.v[k]) | detail::is_nonfinite(r);
      g.v[k] = r;
    }
    if (inv_scale != 1.0f) detail::store<V>(grad, e, g);  // a factor of one: the check alone, nothing to write back
  }
  // Every writer stores the same 1.0f, so the race is benign; no thread ever writes 0 (the caller zeroes the flag).
  __device__ void finish() {
    if (bad) *found_nonfinite = 1.0f;
  }
};

struct AdamWOp {
  float* w;
  float* m;
  float* v;
  const float* g;
  void* lowp;
  Lowp kind;
  detail::AdamWScalars s;
  template <int V>
  __device__ void apply(std::size_t e) {
    FloatVec<V> wv = detail::load<V>(w, e), mv = detail::load<V>(m, e), vv = detail::load<V>(v, e);
    const FloatVec<V> gv = detail::load<V>(g, e);
    for (int k = 0; k < V; ++k)
      wv.v[k] = detail::adamw_update(s, wv.v[k], mv.v[k], vv.v[k], gv.v[k]);
    detail::store<V>(w, e, wv);
    detail::store<V>(m, e, mv);
    detail::store<V>(v, e, vv);
    store_lowp<V>(kind, lowp, e, wv);
  }
  __device__ void finish() {}
};

struct SgdOp {
  float* w;
  float* vel;  // null when momentum == 0
  const float* g;
  void* lowp;
  Lowp kind;
  SgdParams p;
  template <int V>
  __device__ void apply(std::size_t e) {
    FloatVec<V> wv = detail::load<V>(w, e);
    const FloatVec<V> gv = detail::load<V>(g, e);
    FloatVec<V> vv{};
    if (vel != nullptr) vv = detail::load<V>(vel, e);
    for (int k = 0; k < V; ++k)
      wv.v[k] = detail::sgd_update(p.lr, p.momentum, p.weight_decay, p.nesterov, wv.v[k], vv.v[k], gv.v[k]);
    detail::store<V>(w, e, wv);
    if (vel != nullptr) detail::store<V>(vel, e, vv);
    store_lowp<V>(kind, lowp, e, wv);
  }
  __device__ void finish() {}
};

template <int V>
__global__ void __launch_bounds__(kThreads) sum_squares_kernel(const float* x, std::size_t n, double* sum) {
  double acc = 0.0;
  const std::size_t groups = n / V;
  for (std::size_t g = detail::global_thread(); g < groups; g += detail::grid_threads()) {
    const FloatVec<V> f = detail::load<V>(x, g * V);
    for (int k = 0; k < V; ++k)
      acc += double{f.v[k]} * f.v[k];
  }
  const std::size_t tail = detail::global_thread() + groups * V;
  if (tail < n) acc += double{x[tail]} * x[tail];
  acc = detail::block_reduce(acc, detail::Sum{}, 0.0);
  if (threadIdx.x == 0) atomicAdd(sum, acc);
}

}  // namespace

void cast_to_f32(const void* in, DType in_type, float* out, std::size_t n, void* stream) {
  detail::require_lowp_type("cast_to_f32", in_type, "in_type");
  detail::require_pointer("cast_to_f32", in, n, "in");
  detail::require_pointer("cast_to_f32", out, n, "out");
  if (n == 0) return;
  if (in_type == DType::F32) {
    if (in != out)
      TENAX_CUDA_CHECK(
          cudaMemcpyAsync(out, in, n * sizeof(float), cudaMemcpyDeviceToDevice, detail::to_stream(stream)));
    return;
  }
  const WidenOp op{static_cast<const std::uint16_t*>(in), out, in_type == DType::BF16};
  launch_elementwise(n, vec_ok(in, in_type) && vec_ok(out, DType::F32), op, stream);
}

void cast_from_f32(const float* in, void* out, DType out_type, std::size_t n, void* stream) {
  detail::require_lowp_type("cast_from_f32", out_type, "out_type");
  detail::require_pointer("cast_from_f32", in, n, "in");
  detail::require_pointer("cast_from_f32", out, n, "out");
  if (n == 0) return;
  if (out_type == DType::F32) {
    if (in != out)
      TENAX_CUDA_CHECK(
          cudaMemcpyAsync(out, in, n * sizeof(float), cudaMemcpyDeviceToDevice, detail::to_stream(stream)));
    return;
  }
  const NarrowOp op{in, static_cast<std::uint16_t*>(out), out_type == DType::BF16};
  launch_elementwise(n, vec_ok(in, DType::F32) && vec_ok(out, out_type), op, stream);
}

void unscale_and_check(float* grad, std::size_t n, float inv_scale, float* found_nonfinite, void* stream) {
  detail::require_pointer("unscale_and_check", grad, n, "grad");
  detail::require_pointer("unscale_and_check", found_nonfinite, 1, "found_nonfinite");
  launch_elementwise(n, vec_ok(grad, DType::F32), UnscaleOp{grad, inv_scale, found_nonfinite}, stream);
}

void adamw_step(float* master, float* m, float* v, const float* grad, void* lowp_out, DType lowp_type, std::size_t n,
                const AdamWParams& p, void* stream) {
  detail::validate_adamw(p, lowp_out, lowp_type);
  for (const void* ptr : {static_cast<const void*>(master), static_cast<const void*>(m), static_cast<const void*>(v),
                          static_cast<const void*>(grad)})
    detail::require_pointer("adamw_step", ptr, n, "master, m, v or grad");
  const Lowp kind = lowp_kind(lowp_out, lowp_type);
  const AdamWOp op{
      master, m, v, grad, lowp_out, kind, detail::adamw_scalars(p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.step)};
  const bool vec = vec_ok(master, DType::F32) && vec_ok(m, DType::F32) && vec_ok(v, DType::F32) &&
                   vec_ok(grad, DType::F32) && vec_ok(lowp_out, lowp_type);
  launch_elementwise(n, vec, op, stream);
}

void sgd_momentum_step(float* master, float* velocity, const float* grad, void* lowp_out, DType lowp_type,
                       std::size_t n, const SgdParams& p, void* stream) {
  detail::validate_sgd(p, velocity, n, lowp_out, lowp_type);
  detail::require_pointer("sgd_momentum_step", master, n, "master");
  detail::require_pointer("sgd_momentum_step", grad, n, "grad");
  if (p.momentum == 0.0f) velocity = nullptr;  // as on the CPU: no state, never touch the buffer
  const SgdOp op{master, velocity, grad, lowp_out, lowp_kind(lowp_out, lowp_type), p};
  const bool vec = vec_ok(master, DType::F32) && vec_ok(velocity, DType::F32) && vec_ok(grad, DType::F32) &&
                   vec_ok(lowp_out, lowp_type);
  launch_elementwise(n, vec, op, stream);
}

void sum_squares(const float* x, std::size_t n, double* sum_device, void* stream) {
  detail::require_pointer("sum_squares", x, n, "x");
  detail::require_pointer("sum_squares", sum_device, 1, "sum_device");
  if (n == 0) return;
  const bool vec = vec_ok(x, DType::F32);
  const int blocks = detail::grid_blocks(vec ? n / kVec : n, kThreads);
  if (vec)
    sum_squares_kernel<kVec><<<blocks, kThreads, 0, detail::to_stream(stream)>>>(x, n, sum_device);
  else
    sum_squares_kernel<1><<<blocks, kThreads, 0, detail::to_stream(stream)>>>(x, n, sum_device);
  TENAX_CUDA_CHECK_LAUNCH(sum_squares_kernel);
}

}  // namespace tenax::kernels::cuda
