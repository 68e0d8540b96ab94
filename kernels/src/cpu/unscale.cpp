#include "tenax/kernels/unscale.hpp"

#include <cstdint>

#include "common/cpu_clones.hpp"
#include "common/math.hpp"
#include "common/validate.hpp"

namespace tenax::kernels::cpu {

TENAX_CPU_CLONES void unscale_and_check(float* grad, std::size_t n, float inv_scale, float* found_nonfinite) {
  detail::require_pointer("unscale_and_check", grad, n, "grad");
  detail::require_pointer("unscale_and_check", found_nonfinite, 1, "found_nonfinite");
  // OR-ing a flag instead of breaking out keeps the loop branch-free (it vectorises) and makes the single pass cost
  // the same whether or not an overflow occurred.
  std::uint32_t bad = 0;
  if (inv_scale == 1.0f) {
    // The check alone (training without loss scaling or clipping checks every step): a factor of one changes no value,
    // so nothing is written back, which halves the pass's memory traffic.
    for (std::size_t i = 0; i < n; ++i)
      bad |= static_cast<std::uint32_t>(detail::is_nonfinite(grad[i]));
    if (bad) *found_nonfinite = 1.0f;
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float r = g * inv_scale;
    bad |= static_cast<std::uint32_t>(detail::is_nonfinite(g)) | static_cast<std::uint32_t>(detail::is_nonfinite(r));
    grad[i] = r;
  }
  if (bad) *found_nonfinite = 1.0f;
}

}  // namespace tenax::kernels::cpu
