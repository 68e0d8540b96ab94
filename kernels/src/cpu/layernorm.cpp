#include "tenax/kernels/layernorm.hpp"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "common/validate.hpp"

namespace tenax::kernels::cpu {

void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                       std::size_t rows, std::size_t cols, float eps) {
  if (cols == 0) detail::usage_error("layernorm_forward", "cols is 0; a row needs at least one element");
  if (!(eps > 0.0f)) detail::usage_error("layernorm_forward", "eps is " + std::to_string(eps) + "; it must be > 0");
  for (auto [p, name] : {std::pair<const void*, const char*>{x, "x"}, {y, "y"}})
    detail::require_pointer("layernorm_forward", p, rows * cols, name);
  for (auto [p, name] : {std::pair<const void*, const char*>{gamma, "gamma"}, {beta, "beta"}})
    detail::require_pointer("layernorm_forward", p, rows ? cols : 0, name);
  for (auto [p, name] : {std::pair<const void*, const char*>{mean, "mean"}, {rstd, "rstd"}})
    detail::require_pointer("layernorm_forward", p, rows, name);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    // Two passes in double (mean, then the centred sum of squares): exact enough that rows with a large mean and a
    // tiny spread keep their variance, which the one-pass E[x^2] - E[x]^2 would cancel away.
    double sum = 0.0;
    for (std::size_t c = 0; c < cols; ++c)
      sum += xr[c];
    const double mu = sum / static_cast<double>(cols);
    double centred = 0.0;
    for (std::size_t c = 0; c < cols; ++c) {
      const double d = xr[c] - mu;
      centred += d * d;
    }
    const float mu_f = static_cast<float>(mu);
    const float rs = static_cast<float>(1.0 / std::sqrt(centred / static_cast<double>(cols) + eps));
    mean[r] = mu_f;
    rstd[r] = rs;
    float* yr = y + r * cols;
    for (std::size_t c = 0; c < cols; ++c)
      yr[c] = (xr[c] - mu_f) * rs * gamma[c] + beta[c];
  }
}

void layernorm_backward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dy,
                        float* dx, float* dgamma, float* dbeta, std::size_t rows, std::size_t cols) {
  if (cols == 0) detail::usage_error("layernorm_backward", "cols is 0; a row needs at least one element");
  for (auto [p, name] : {std::pair<const void*, const char*>{x, "x"}, {dy, "dy"}, {dx, "dx"}})
    detail::require_pointer("layernorm_backward", p, rows * cols, name);
  for (auto [p, name] : {std::pair<const void*, const char*>{gamma, "gamma"}, {dgamma, "dgamma"}, {dbeta, "dbeta"}})
    detail::require_pointer("layernorm_backward", p, rows ? cols : 0, name);
  for (auto [p, name] : {std::pair<const void*, const char*>{mean, "mean"}, {rstd, "rstd"}})
    detail::require_pointer("layernorm_backward", p, rows, name);
  // With xhat = (x - mean) * rstd and g = dy * gamma:  dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
  std::vector<double> dgamma_sum(cols, 0.0);
  std::vector<double> dbeta_sum(cols, 0.0);
  const double inv_cols = 1.0 / static_cast<double>(cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    const float mu = mean[r];
    const float rs = rstd[r];
    double sum_g = 0.0;
    double sum_g_xhat = 0.0;
    for (std::size_t c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - mu) * rs;
      const float g = dyr[c] * gamma[c];
      sum_g += g;
      sum_g_xhat += static_cast<double>(g) * xhat;
      dgamma_sum[c] += static_cast<double>(dyr[c]) * xhat;
      dbeta_sum[c] += dyr[c];
    }
    const float mean_g = static_cast<float>(sum_g * inv_cols);
    const float mean_g_xhat = static_cast<float>(sum_g_xhat * inv_cols);
    float* dxr = dx + r * cols;
    for (std::size_t c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - mu) * rs;
      dxr[c] = rs * (dyr[c] * gamma[c] - mean_g - xhat * mean_g_xhat);
    }
  }
  for (std::size_t c = 0; c < cols; ++c) {
    dgamma[c] = static_cast<float>(dgamma[c] + dgamma_sum[c]);
    dbeta[c] = static_cast<float>(dbeta[c] + dbeta_sum[c]);
  }
}

}  // namespace tenax::kernels::cpu
