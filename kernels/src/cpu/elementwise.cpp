#include "tenax/kernels/elementwise.hpp"

#include "common/cpu_clones.hpp"
#include "common/validate.hpp"

namespace tenax::kernels::cpu {

TENAX_CPU_CLONES void add_inplace(float* y, const float* x, std::size_t n) {
  detail::require_pointer("add_inplace", y, n, "y");
  detail::require_pointer("add_inplace", x, n, "x");
  for (std::size_t i = 0; i < n; ++i)
    y[i] += x[i];
}

TENAX_CPU_CLONES void bias_add(float* y, const float* bias, std::size_t rows, std::size_t cols) {
  detail::require_pointer("bias_add", y, rows * cols, "y");
  detail::require_pointer("bias_add", bias, rows ? cols : 0, "bias");
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      y[r * cols + c] += bias[c];
}

TENAX_CPU_CLONES void bias_grad(const float* dy, float* dbias, std::size_t rows, std::size_t cols) {
  detail::require_pointer("bias_grad", dy, rows * cols, "dy");
  detail::require_pointer("bias_grad", dbias, rows ? cols : 0, "dbias");
  // Row by row into the fp32 gradient itself: the summation order is fixed (deterministic), and the reads sequential.
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      dbias[c] += dy[r * cols + c];
}

}  // namespace tenax::kernels::cpu
