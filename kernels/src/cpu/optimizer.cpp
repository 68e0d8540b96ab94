#include "tenax/kernels/optimizer.hpp"

#include <cstdint>

#include "common/cpu_clones.hpp"
#include "common/math.hpp"
#include "common/validate.hpp"

namespace tenax::kernels::cpu {
namespace {

// What the fused step writes besides the fp32 state: nothing, an fp32 copy, or 16-bit bits. A template parameter, so
// each loop is specialised and the per-element work has no type switch.
enum class Lowp { None, F32, BF16, F16 };

Lowp lowp_kind(const void* lowp_out, DType t) {
  if (lowp_out == nullptr) return Lowp::None;
  if (t == DType::F32) return Lowp::F32;
  return t == DType::BF16 ? Lowp::BF16 : Lowp::F16;
}

template <Lowp L>
inline void store_lowp(void* out, std::size_t i, float w) {
  if constexpr (L == Lowp::F32) static_cast<float*>(out)[i] = w;
  if constexpr (L == Lowp::BF16) static_cast<std::uint16_t*>(out)[i] = float_to_bf16_bits(w);
  if constexpr (L == Lowp::F16) static_cast<std::uint16_t*>(out)[i] = float_to_f16_bits(w);
}

// The loops take every parameter by value: read through a reference, each store to master[] might alias it, so the
// compiler would reload it every iteration and refuse to vectorise.
template <Lowp L>
TENAX_CPU_CLONES void adamw_loop(float* master, float* m, float* v, const float* grad, void* lowp_out, std::size_t n,
                                 const detail::AdamWScalars s) {
  for (std::size_t i = 0; i < n; ++i) {
    const float w = detail::adamw_update(s, master[i], m[i], v[i], grad[i]);
    master[i] = w;
    store_lowp<L>(lowp_out, i, w);
  }
}

// Nesterov is a template parameter for the same reason: a per-element choice is a branch the vectoriser rejects.
template <Lowp L, bool Nesterov>
TENAX_CPU_CLONES void sgd_loop(float* master, float* velocity, const float* grad, void* lowp_out, std::size_t n,
                               const float lr, const float momentum, const float weight_decay) {
  for (std::size_t i = 0; i < n; ++i) {
    const float w = detail::sgd_update(lr, momentum, weight_decay, Nesterov, master[i], velocity[i], grad[i]);
    master[i] = w;
    store_lowp<L>(lowp_out, i, w);
  }
}

// momentum == 0: plain SGD, no state.
template <Lowp L>
TENAX_CPU_CLONES void sgd_plain_loop(float* master, const float* grad, void* lowp_out, std::size_t n, const float lr,
                                     const float weight_decay) {
  for (std::size_t i = 0; i < n; ++i) {
    float no_velocity = 0.0f;
    const float w = detail::sgd_update(lr, 0.0f, weight_decay, false, master[i], no_velocity, grad[i]);
    master[i] = w;
    store_lowp<L>(lowp_out, i, w);
  }
}

template <Lowp L>
void sgd_dispatch(float* master, float* velocity, const float* grad, void* lowp_out, std::size_t n,
                  const SgdParams& p) {
  if (velocity == nullptr) return sgd_plain_loop<L>(master, grad, lowp_out, n, p.lr, p.weight_decay);
  if (p.nesterov) return sgd_loop<L, true>(master, velocity, grad, lowp_out, n, p.lr, p.momentum, p.weight_decay);
  sgd_loop<L, false>(master, velocity, grad, lowp_out, n, p.lr, p.momentum, p.weight_decay);
}

}  // namespace

void adamw_step(float* master, float* m, float* v, const float* grad, void* lowp_out, DType lowp_type, std::size_t n,
                const AdamWParams& p) {
  detail::validate_adamw(p, lowp_out, lowp_type);
  detail::require_pointer("adamw_step", master, n, "master");
  detail::require_pointer("adamw_step", m, n, "m");
  detail::require_pointer("adamw_step", v, n, "v");
  detail::require_pointer("adamw_step", grad, n, "grad");
  const auto s = detail::adamw_scalars(p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.step);
  switch (lowp_kind(lowp_out, lowp_type)) {
    case Lowp::None:
      return adamw_loop<Lowp::None>(master, m, v, grad, lowp_out, n, s);
    case Lowp::F32:
      return adamw_loop<Lowp::F32>(master, m, v, grad, lowp_out, n, s);
    case Lowp::BF16:
      return adamw_loop<Lowp::BF16>(master, m, v, grad, lowp_out, n, s);
    case Lowp::F16:
      return adamw_loop<Lowp::F16>(master, m, v, grad, lowp_out, n, s);
  }
}

void sgd_momentum_step(float* master, float* velocity, const float* grad, void* lowp_out, DType lowp_type,
                       std::size_t n, const SgdParams& p) {
  detail::validate_sgd(p, velocity, n, lowp_out, lowp_type);
  detail::require_pointer("sgd_momentum_step", master, n, "master");
  detail::require_pointer("sgd_momentum_step", grad, n, "grad");
  if (p.momentum == 0.0f) velocity = nullptr;  // no state to keep: never touch a buffer the caller may not have
  switch (lowp_kind(lowp_out, lowp_type)) {
    case Lowp::None:
      return sgd_dispatch<Lowp::None>(master, velocity, grad, lowp_out, n, p);
    case Lowp::F32:
      return sgd_dispatch<Lowp::F32>(master, velocity, grad, lowp_out, n, p);
    case Lowp::BF16:
      return sgd_dispatch<Lowp::BF16>(master, velocity, grad, lowp_out, n, p);
    case Lowp::F16:
      return sgd_dispatch<Lowp::F16>(master, velocity, grad, lowp_out, n, p);
  }
}

}  // namespace tenax::kernels::cpu
