#include "tenax/kernels/activation.hpp"

#include <vector>

#include "common/cpu_clones.hpp"
#include "common/math.hpp"
#include "common/validate.hpp"

namespace tenax::kernels::cpu {

TENAX_CPU_CLONES void bias_gelu_forward(const float* in, const float* bias, float* out, std::size_t rows,
                                        std::size_t cols) {
  detail::require_pointer("bias_gelu_forward", in, rows * cols, "in");
  detail::require_pointer("bias_gelu_forward", bias, cols, "bias");
  detail::require_pointer("bias_gelu_forward", out, rows * cols, "out");
  for (std::size_t r = 0; r < rows; ++r) {
    const float* x = in + r * cols;
    float* y = out + r * cols;
    for (std::size_t c = 0; c < cols; ++c)
      y[c] = detail::gelu_tanh(x[c] + bias[c]);
  }
}

TENAX_CPU_CLONES void bias_gelu_backward(const float* in, const float* bias, const float* dout, float* din,
                                         float* dbias, std::size_t rows, std::size_t cols) {
  detail::require_pointer("bias_gelu_backward", in, rows * cols, "in");
  detail::require_pointer("bias_gelu_backward", bias, cols, "bias");
  detail::require_pointer("bias_gelu_backward", dout, rows * cols, "dout");
  detail::require_pointer("bias_gelu_backward", din, rows * cols, "din");
  detail::require_pointer("bias_gelu_backward", dbias, cols, "dbias");
  // The bias gradient sums `rows` terms per column: a double accumulator per column keeps it accurate for large batches
  // and the row-major walk keeps the reads sequential; the order is fixed, so the result is deterministic.
  std::vector<double> column_sum(cols, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* x = in + r * cols;
    const float* dy = dout + r * cols;
    float* dx = din + r * cols;
    for (std::size_t c = 0; c < cols; ++c) {
      const float g = dy[c] * detail::gelu_tanh_grad(x[c] + bias[c]);
      dx[c] = g;
      column_sum[c] += g;
    }
  }
  for (std::size_t c = 0; c < cols; ++c)
    dbias[c] = static_cast<float>(dbias[c] + column_sum[c]);
}

}  // namespace tenax::kernels::cpu
