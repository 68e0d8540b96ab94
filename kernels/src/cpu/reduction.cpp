#include "tenax/kernels/reduction.hpp"

#include "common/validate.hpp"

namespace tenax::kernels::cpu {

double sum_squares(const float* x, std::size_t n) {
  detail::require_pointer("sum_squares", x, n, "x");
  // Four independent double accumulators in a fixed interleaving: deterministic, and not limited by the latency of one
  // dependent add chain.
  double acc[4] = {0.0, 0.0, 0.0, 0.0};
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int j = 0; j < 4; ++j) {
      const double v = x[i + j];
      acc[j] += v * v;
    }
  }
  for (; i < n; ++i) {
    const double v = x[i];
    acc[0] += v * v;
  }
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

}  // namespace tenax::kernels::cpu
