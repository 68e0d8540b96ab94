// The vectorisable exp used by the CPU GeLU and cross-entropy kernels, against float64 exp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/vector_exp.hpp"

namespace tenax::kernels {
namespace {

TEST(VectorExpTest, IsWithinTwoUlpOfFloat64ExpOverTheWholeRange) {
  double worst_ulp = 0;
  float worst_x = 0;
  // ~470k points spread over the whole normal output range, both signs, including tiny arguments.
  for (float x = -87.0f; x < 88.3f; x = std::nextafter(x + 2e-4f * std::fabs(x), 1e30f)) {
    const double expected = std::exp(static_cast<double>(x));
    const float rounded = static_cast<float>(expected);
    const double ulp = std::nextafter(rounded, std::numeric_limits<float>::max()) - rounded;
    const double error = std::fabs(detail::vector_exp(x) - expected) / ulp;
    if (error > worst_ulp) {
      worst_ulp = error;
      worst_x = x;
    }
  }
  EXPECT_LE(worst_ulp, 2.0) << "at x = " << worst_x;
}

TEST(VectorExpTest, SpecialValuesAreExact) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(detail::vector_exp(0.0f), 1.0f);
  EXPECT_EQ(detail::vector_exp(-inf), 0.0f);
  EXPECT_EQ(detail::vector_exp(-100.0f), 0.0f);  // underflow
  EXPECT_EQ(detail::vector_exp(inf), inf);
  EXPECT_EQ(detail::vector_exp(100.0f), inf);  // overflow
  EXPECT_TRUE(std::isnan(detail::vector_exp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(detail::vector_exp(-std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace tenax::kernels
