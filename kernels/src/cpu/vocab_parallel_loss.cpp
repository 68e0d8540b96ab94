#include "tenax/kernels/vocab_parallel_loss.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "common/cpu_clones.hpp"
#include "common/math.hpp"
#include "common/validate.hpp"

namespace tenax::kernels::cpu {

TENAX_CPU_CLONES void ce_row_max(const float* logits, std::size_t rows, std::size_t vocab_local, float* row_max,
                                 std::size_t ld) {
  ld = detail::row_stride("ce_row_max", vocab_local, ld);
  detail::require_pointer("ce_row_max", logits, detail::matrix_span("ce_row_max", rows, vocab_local, ld), "logits");
  detail::require_pointer("ce_row_max", row_max, rows, "row_max");
  // Eight running maxima side by side (one vector register), folded at the end: a single running maximum is a chain
  // the vectoriser will not reorder. std::max skips a NaN logit as fmax does (the row's sum turns NaN later), and it
  // compiles to max instructions instead of a libm call. The maximum of a set is the same in any order.
  constexpr std::size_t kLanes = 8;
  for (std::size_t r = 0; r < rows; ++r) {
    const float* x = logits + r * ld;
    float lanes[kLanes];
    std::fill_n(lanes, kLanes, -std::numeric_limits<float>::infinity());
    std::size_t c = 0;
    for (; c + kLanes <= vocab_local; c += kLanes)
      for (std::size_t k = 0; k < kLanes; ++k)
        lanes[k] = std::max(lanes[k], x[c + k]);
    float m = lanes[0];
    for (std::size_t k = 1; k < kLanes; ++k)
      m = std::max(m, lanes[k]);
    for (; c < vocab_local; ++c)
      m = std::max(m, x[c]);
    row_max[r] = m;
  }
}

TENAX_CPU_CLONES void ce_row_sums(const float* logits, const std::int32_t* targets, std::size_t rows,
                                  std::size_t vocab_local, std::size_t vocab_begin, const float* row_max, double* sums,
                                  std::size_t ld) {
  ld = detail::row_stride("ce_row_sums", vocab_local, ld);
  detail::require_pointer("ce_row_sums", logits, detail::matrix_span("ce_row_sums", rows, vocab_local, ld), "logits");
  detail::require_pointer("ce_row_sums", targets, rows, "targets");
  detail::require_pointer("ce_row_sums", row_max, rows, "row_max");
  detail::require_pointer("ce_row_sums", sums, 2 * rows, "sums");
  // exp(x - max) in fp32 through the vectorising exp (as the CUDA kernel uses expf), into a block of the stack, then
  // summed in double over four fixed partial sums: vectorised, accurate for any vocabulary, and deterministic.
  constexpr std::size_t kBlock = 512;
  std::array<float, kBlock> block;
  for (std::size_t r = 0; r < rows; ++r) {
    const float* x = logits + r * ld;
    const float m = row_max[r];
    double partial[4] = {0.0, 0.0, 0.0, 0.0};
    for (std::size_t begin = 0; begin < vocab_local; begin += kBlock) {
      const std::size_t n = std::min(kBlock, vocab_local - begin);
      for (std::size_t c = 0; c < n; ++c)
        block[c] = detail::kernel_exp(x[begin + c] - m);
      std::size_t c = 0;
      for (; c + 4 <= n; c += 4)
        for (std::size_t k = 0; k < 4; ++k)
          partial[k] += static_cast<double>(block[c + k]);
      for (; c < n; ++c)
        partial[0] += static_cast<double>(block[c]);
    }
    sums[r] = (partial[0] + partial[1]) + (partial[2] + partial[3]);
    const auto t = static_cast<std::size_t>(targets[r]);
    sums[rows + r] = t >= vocab_begin && t < vocab_begin + vocab_local ? x[t - vocab_begin] : 0.0;
  }
}

TENAX_CPU_CLONES double ce_finish(const float* logits, const std::int32_t* targets, float* dlogits, std::size_t rows,
                                  std::size_t vocab_local, std::size_t vocab_begin, const float* row_max,
                                  const double* sums, float grad_scale, std::size_t ld) {
  ld = detail::row_stride("ce_finish", vocab_local, ld);
  detail::require_pointer("ce_finish", logits, detail::matrix_span("ce_finish", rows, vocab_local, ld), "logits");
  detail::require_pointer("ce_finish", targets, rows, "targets");
  detail::require_pointer("ce_finish", row_max, rows, "row_max");
  detail::require_pointer("ce_finish", sums, 2 * rows, "sums");
  double loss = 0.0;
  for (std::size_t r = 0; r < rows; ++r)
    loss += std::log(sums[r]) + row_max[r] - sums[rows + r];
  if (dlogits == nullptr) return loss;
  // softmax - onehot in fp32 (as the CUDA kernel): a branch-free loop that vectorises, then the target's element.
  // dlogits may be logits itself (the loss overwrites its logits in place): going through a block on the stack keeps
  // the loop free of aliasing, which the vectoriser would otherwise guard with a scalar fallback that in-place calls
  // always take.
  constexpr std::size_t kBlock = 512;
  std::array<float, kBlock> block;
  for (std::size_t r = 0; r < rows; ++r) {
    const float scale = static_cast<float>(1.0 / sums[r]) * grad_scale, m = row_max[r];
    const float* x = logits + r * ld;
    float* d = dlogits + r * ld;
    for (std::size_t begin = 0; begin < vocab_local; begin += kBlock) {
      const std::size_t n = std::min(kBlock, vocab_local - begin);
      for (std::size_t c = 0; c < n; ++c)
        block[c] = detail::kernel_exp(x[begin + c] - m) * scale;
      std::copy_n(block.data(), n, d + begin);
    }
    const auto t = static_cast<std::size_t>(targets[r]);
    if (t >= vocab_begin && t < vocab_begin + vocab_local) d[t - vocab_begin] -= grad_scale;
  }
  return loss;
}

}  // namespace tenax::kernels::cpu
