#include "tenax/kernels/loss.hpp"

#include <cmath>
#include <string>

#include "common/cpu_clones.hpp"
#include "common/validate.hpp"
#include "common/vector_exp.hpp"

namespace tenax::kernels::cpu {

TENAX_CPU_CLONES double softmax_cross_entropy(const float* logits, const std::int32_t* targets, float* dlogits,
                                              std::size_t rows, std::size_t vocab, float grad_scale) {
  if (rows == 0) return 0.0;
  if (vocab == 0) detail::usage_error("softmax_cross_entropy", "vocab is 0; the logits need at least one column");
  detail::require_pointer("softmax_cross_entropy", logits, rows * vocab, "logits");
  detail::require_pointer("softmax_cross_entropy", targets, rows, "targets");
  for (std::size_t r = 0; r < rows; ++r) {
    if (targets[r] < 0 || static_cast<std::size_t>(targets[r]) >= vocab)
      detail::usage_error("softmax_cross_entropy", "targets[" + std::to_string(r) +
                                                       "] = " + std::to_string(targets[r]) + " is outside [0, " +
                                                       std::to_string(vocab) + ")");
  }
  const float row_scale = grad_scale / static_cast<float>(rows);
  double loss_sum = 0.0;
  for (std::size_t r = 0; r < rows; ++r) {
    const float* x = logits + r * vocab;
    const std::size_t target = static_cast<std::size_t>(targets[r]);
    const float x_target = x[target];  // read first: dlogits may alias logits
    float max = x[0];
    for (std::size_t j = 1; j < vocab; ++j)
      max = x[j] > max ? x[j] : max;
    // Subtracting the row maximum keeps every exponent <= 0 (no overflow); the sum is in double so a large vocabulary
    // loses nothing to rounding.
    double sum = 0.0;
    if (dlogits == nullptr) {
      for (std::size_t j = 0; j < vocab; ++j)
        sum += detail::vector_exp(x[j] - max);
    } else {
      float* g = dlogits + r * vocab;
      // The exponentials go to dlogits first (a loop that vectorises), then are summed in a fixed order; the gradient
      // pass then needs no second exp.
      for (std::size_t j = 0; j < vocab; ++j)
        g[j] = detail::vector_exp(x[j] - max);
      for (std::size_t j = 0; j < vocab; ++j)
        sum += g[j];
      const float scale = static_cast<float>(row_scale / sum);
      for (std::size_t j = 0; j < vocab; ++j)
        g[j] *= scale;
      g[target] -= row_scale;
    }
    // log(sum) - (x_target - max) rather than max + log(sum) - x_target: with logits of 1e30 the latter cancels away
    // the whole loss.
    loss_sum += std::log(sum) - (static_cast<double>(x_target) - static_cast<double>(max));
  }
  return loss_sum;
}

}  // namespace tenax::kernels::cpu
