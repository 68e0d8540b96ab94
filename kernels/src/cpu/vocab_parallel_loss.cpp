#include "tenax/kernels/vocab_parallel_loss.hpp"

#include <cmath>
#include <limits>

#include "common/validate.hpp"

namespace tenax::kernels::cpu {

void ce_row_max(const float* logits, std::size_t rows, std::size_t vocab_local, float* row_max) {
  detail::require_pointer("ce_row_max", logits, rows * vocab_local, "logits");
  detail::require_pointer("ce_row_max", row_max, rows, "row_max");
  for (std::size_t r = 0; r < rows; ++r) {
    float m = -std::numeric_limits<float>::infinity();
    for (std::size_t c = 0; c < vocab_local; ++c)
      m = std::fmax(m, logits[r * vocab_local + c]);
    row_max[r] = m;
  }
}

void ce_row_sums(const float* logits, const std::int32_t* targets, std::size_t rows, std::size_t vocab_local,
                 std::size_t vocab_begin, const float* row_max, double* sums) {
  detail::require_pointer("ce_row_sums", logits, rows * vocab_local, "logits");
  detail::require_pointer("ce_row_sums", targets, rows, "targets");
  detail::require_pointer("ce_row_sums", row_max, rows, "row_max");
  detail::require_pointer("ce_row_sums", sums, 2 * rows, "sums");
  for (std::size_t r = 0; r < rows; ++r) {
    double s = 0.0;
    for (std::size_t c = 0; c < vocab_local; ++c)
      s += std::exp(static_cast<double>(logits[r * vocab_local + c] - row_max[r]));
    sums[r] = s;
    const auto t = static_cast<std::size_t>(targets[r]);
    sums[rows + r] =
        t >= vocab_begin && t < vocab_begin + vocab_local ? logits[r * vocab_local + (t - vocab_begin)] : 0.0;
  }
}

double ce_finish(const float* logits, const std::int32_t* targets, float* dlogits, std::size_t rows,
                 std::size_t vocab_local, std::size_t vocab_begin, const float* row_max, const double* sums,
                 float grad_scale) {
  detail::require_pointer("ce_finish", logits, rows * vocab_local, "logits");
  detail::require_pointer("ce_finish", targets, rows, "targets");
  detail::require_pointer("ce_finish", row_max, rows, "row_max");
  detail::require_pointer("ce_finish", sums, 2 * rows, "sums");
  double loss = 0.0;
  for (std::size_t r = 0; r < rows; ++r)
    loss += std::log(sums[r]) + row_max[r] - sums[rows + r];
  if (dlogits == nullptr) return loss;
  for (std::size_t r = 0; r < rows; ++r) {
    const double inv_sum = 1.0 / sums[r];
    const auto t = static_cast<std::size_t>(targets[r]);
    for (std::size_t c = 0; c < vocab_local; ++c) {
      const std::size_t i = r * vocab_local + c;
      double p = std::exp(static_cast<double>(logits[i] - row_max[r])) * inv_sum;
      if (vocab_begin + c == t) p -= 1.0;
      dlogits[i] = static_cast<float>(p * grad_scale);
    }
  }
  return loss;
}

}  // namespace tenax::kernels::cpu
