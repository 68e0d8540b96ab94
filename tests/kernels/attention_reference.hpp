// Float64 references of the attention core (tenax/kernels/attention.hpp), written from the formulas, not from the
// kernels: naive loops over (b, h), full T x T matrices with the mask applied explicitly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace tenax::kernels::test {

struct AttentionSize {
  std::size_t B, H, T, D;
  std::size_t heads() const { return B * H; }
  std::size_t head_elems() const { return B * H * T * D; }
  std::size_t score_elems() const { return B * H * T * T; }
};

// Causal softmax of scale * s over `blocks` T x T blocks; masked entries 0.
inline std::vector<double> ref_causal_softmax(const std::vector<double>& s, std::size_t blocks, std::size_t T,
                                              double scale) {
  std::vector<double> p(blocks * T * T, 0.0);
  for (std::size_t r = 0; r < blocks * T; ++r) {
    const std::size_t i = r % T;
    double m = -INFINITY;
    for (std::size_t j = 0; j <= i; ++j)
      m = std::max(m, scale * s[r * T + j]);
    double sum = 0.0;
    for (std::size_t j = 0; j <= i; ++j)
      sum += std::exp(scale * s[r * T + j] - m);
    for (std::size_t j = 0; j <= i; ++j)
      p[r * T + j] = std::exp(scale * s[r * T + j] - m) / sum;
  }
  return p;
}

inline std::vector<double> ref_causal_softmax_backward(const std::vector<double>& p, const std::vector<double>& dp,
                                                       std::size_t blocks, std::size_t T, double scale) {
  std::vector<double> ds(blocks * T * T, 0.0);
  for (std::size_t r = 0; r < blocks * T; ++r) {
    const std::size_t i = r % T;
    double dot = 0.0;
    for (std::size_t j = 0; j <= i; ++j)
      dot += dp[r * T + j] * p[r * T + j];
    for (std::size_t j = 0; j <= i; ++j)
      ds[r * T + j] = scale * p[r * T + j] * (dp[r * T + j] - dot);
  }
  return ds;
}

// c[bh] = op(a[bh]) op(b[bh]) for T x D / T x T per-head matrices: the products of the core.
// rows x inner times inner x cols, each operand optionally transposed (stored as its transpose).
inline void ref_products(const std::vector<double>& a, bool a_t, const std::vector<double>& b, bool b_t,
                         std::vector<double>& c, std::size_t heads, std::size_t rows, std::size_t cols,
                         std::size_t inner) {
  c.assign(heads * rows * cols, 0.0);
  for (std::size_t h = 0; h < heads; ++h) {
    const double* A = a.data() + h * rows * inner;
    const double* Bm = b.data() + h * inner * cols;
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) {
        double s = 0.0;
        for (std::size_t x = 0; x < inner; ++x)
          s += (a_t ? A[x * rows + i] : A[i * inner + x]) * (b_t ? Bm[j * inner + x] : Bm[x * cols + j]);
        c[(h * rows + i) * cols + j] = s;
      }
  }
}

struct RefForward {
  std::vector<double> p, out;
};

inline RefForward ref_attention_forward(const std::vector<double>& q, const std::vector<double>& k,
                                        const std::vector<double>& v, const AttentionSize& n, double scale) {
  RefForward f;
  std::vector<double> s;
  ref_products(q, false, k, true, s, n.heads(), n.T, n.T, n.D);
  f.p = ref_causal_softmax(s, n.heads(), n.T, scale);
  ref_products(f.p, false, v, false, f.out, n.heads(), n.T, n.D, n.T);
  return f;
}

struct RefGrads {
  std::vector<double> dq, dk, dv;
};

inline RefGrads ref_attention_backward(const std::vector<double>& q, const std::vector<double>& k,
                                       const std::vector<double>& v, const std::vector<double>& d_out,
                                       const AttentionSize& n, double scale) {
  const RefForward f = ref_attention_forward(q, k, v, n, scale);
  RefGrads g;
  std::vector<double> dp;
  ref_products(d_out, false, v, true, dp, n.heads(), n.T, n.T, n.D);
  ref_products(f.p, true, d_out, false, g.dv, n.heads(), n.T, n.D, n.T);
  const std::vector<double> ds = ref_causal_softmax_backward(f.p, dp, n.heads(), n.T, scale);
  ref_products(ds, false, k, false, g.dq, n.heads(), n.T, n.D, n.T);
  ref_products(ds, true, q, false, g.dk, n.heads(), n.T, n.D, n.T);
  return g;
}

inline std::vector<double> widen(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

// max |a - b| / (abs + |b|) style measure: the largest |a - b| over elements, for reporting measured differences.
inline double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

// ||a - b|| / ||b|| over the whole tensor: the measure for the 16-bit paths, whose element errors vary widely.
inline double relative_error(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace tenax::kernels::test
