// Helpers shared by the kernel tests: seeded random data, float64 comparisons and the GPU-requirement switch.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tenax/env.hpp"

namespace tenax::kernels::test {

// Uniform floats in [lo, hi) from a fixed seed: every run sees the same data, so a failure reproduces.
inline std::vector<float> random_floats(std::size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v)
    x = dist(gen);
  return v;
}

// `n` token ids (or class targets) uniform in [0, vocab).
inline std::vector<std::int32_t> random_tokens(std::size_t n, std::size_t vocab, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::int32_t> dist(0, static_cast<std::int32_t>(vocab) - 1);
  std::vector<std::int32_t> t(n);
  for (auto& x : t)
    x = dist(gen);
  return t;
}

// TENAX_TEST_GPU=1 turns "no usable GPU" from a skip into a failure, so a GPU CI job cannot pass by silently skipping
// everything. Read through the runtime's variable registry (the tests link libtenax), so it parses like every other.
inline bool gpu_required() {
  return env::get_bool("TENAX_TEST_GPU");
}

// |actual - expected| <= abs_tol + rel_tol * |expected|, reporting the index of the first mismatch.
inline ::testing::AssertionResult all_close(const std::vector<float>& actual, const std::vector<double>& expected,
                                            double rel_tol, double abs_tol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << actual.size() << " != " << expected.size();
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    if (!(diff <= abs_tol + rel_tol * std::fabs(expected[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << actual[i] << " vs expected " << expected[i]
                                           << " (difference " << diff << ")";
  }
  return ::testing::AssertionSuccess();
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

}  // namespace tenax::kernels::test
