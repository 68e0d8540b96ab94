// Casts against float64 decodings of the 16-bit formats: every bit pattern for widening, every rounding tie and the
// special values for narrowing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include "kernel_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/kernels/cast.hpp"
#include "tenax/kernels/half.hpp"

namespace tenax::kernels {
namespace {

// An IEEE-style binary format with `exp_bits` exponent and `man_bits` stored mantissa bits (bf16: 8/7, f16: 5/10).
struct Format {
  int exp_bits;
  int man_bits;
  DType type;
};
constexpr Format kBf16{8, 7, DType::BF16};
constexpr Format kF16{5, 10, DType::F16};

// The value of a bit pattern computed from its fields in double (NaN for NaN patterns).
double decode(const Format& f, std::uint16_t bits) {
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  const int exp_max = (1 << f.exp_bits) - 1;
  const bool negative = (bits >> (f.exp_bits + f.man_bits)) & 1;
  const int e = (bits >> f.man_bits) & exp_max;
  const int man = bits & ((1 << f.man_bits) - 1);
  double value;
  if (e == exp_max) {
    value = man == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    value = std::ldexp(static_cast<double>(man), 1 - bias - f.man_bits);  // subnormal (or zero)
  } else {
    value = std::ldexp(static_cast<double>(man + (1 << f.man_bits)), e - bias - f.man_bits);
  }
  return negative ? -value : value;
}

std::vector<float> widen_all(const Format& f) {
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t i = 0; i < 65536; ++i)
    all[i] = static_cast<std::uint16_t>(i);
  std::vector<float> out(65536);
  cast_to_f32(all.data(), f.type, out.data(), all.size());
  return out;
}

void expect_exhaustive_widening(const Format& f) {
  const std::vector<float> out = widen_all(f);
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const double expected = decode(f, static_cast<std::uint16_t>(i));
    const bool negative = (i >> 15) & 1;
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(out[i])) << "pattern 0x" << std::hex << i;
      ASSERT_EQ(std::signbit(out[i]), negative) << "NaN sign, pattern 0x" << std::hex << i;
    } else {
      // Every value of both formats is exactly representable in fp32: equality, including the sign of zero.
      ASSERT_EQ(static_cast<double>(out[i]), expected) << "pattern 0x" << std::hex << i;
      ASSERT_EQ(std::signbit(out[i]), negative) << "pattern 0x" << std::hex << i;
    }
    const float scalar = f.type == DType::BF16 ? bf16_bits_to_float(static_cast<std::uint16_t>(i))
                                               : f16_bits_to_float(static_cast<std::uint16_t>(i));
    ASSERT_EQ(float_bits(scalar), float_bits(out[i])) << "scalar, pattern 0x" << std::hex << i;
  }
}

TEST(CastTest, Bf16ToF32IsExactForAllBitPatterns) {
  expect_exhaustive_widening(kBf16);
}
TEST(CastTest, F16ToF32IsExactForAllBitPatterns) {
  expect_exhaustive_widening(kF16);
}

// Round-to-nearest-even into format f, computed from the sorted table of the format's finite non-negative values.
class NarrowingReference {
 public:
  explicit NarrowingReference(const Format& f) : format_(f) {
    const std::uint16_t sign_bit = static_cast<std::uint16_t>(1u << (f.exp_bits + f.man_bits));
    for (std::uint32_t b = 0; b < sign_bit; ++b) {
      const double v = decode(f, static_cast<std::uint16_t>(b));
      if (std::isfinite(v)) patterns_.push_back(static_cast<std::uint16_t>(b));  // increasing with the value
    }
    max_finite_ = decode(f, patterns_.back());
    const double ulp_of_max = max_finite_ - decode(f, patterns_[patterns_.size() - 2]);
    overflow_threshold_ = max_finite_ + ulp_of_max / 2;  // the tie there rounds to inf (max's mantissa is odd)
  }

  // The expected bits for finite or infinite x (NaN is checked separately).
  std::uint16_t round(float x) const {
    const std::uint16_t sign = std::signbit(x) ? static_cast<std::uint16_t>(0x8000u) : 0;
    const std::uint16_t inf = static_cast<std::uint16_t>(((1u << format_.exp_bits) - 1u) << format_.man_bits);
    const double a = std::fabs(static_cast<double>(x));
    if (a >= overflow_threshold_) return sign | inf;
    auto it = std::lower_bound(patterns_.begin(), patterns_.end(), a,
                               [this](std::uint16_t p, double v) { return decode(format_, p) < v; });
    if (it == patterns_.end()) return sign | patterns_.back();  // above max but below the threshold: rounds down
    const std::uint16_t hi = *it;
    if (decode(format_, hi) == a) return sign | hi;
    const std::uint16_t lo = *(it - 1);
    const double d_lo = a - decode(format_, lo);
    const double d_hi = decode(format_, hi) - a;
    if (d_lo < d_hi) return sign | lo;
    if (d_hi < d_lo) return sign | hi;
    return sign | ((lo & 1u) == 0 ? lo : hi);  // a tie: the even pattern
  }

  const std::vector<std::uint16_t>& patterns() const { return patterns_; }
  double max_finite() const { return max_finite_; }

 private:
  Format format_;
  std::vector<std::uint16_t> patterns_;
  double max_finite_ = 0;
  double overflow_threshold_ = 0;
};

// Inputs that exercise every rounding case: each representable value, each midpoint between neighbours (the ties),
// one fp32 ulp either side of each midpoint, fp32 subnormals, values around the overflow threshold and random floats
// across the whole exponent range; all with both signs.
std::vector<float> narrowing_inputs(const NarrowingReference& ref, const Format& f) {
  std::vector<float> in;
  const auto& p = ref.patterns();
  for (std::size_t i = 0; i + 1 < p.size(); ++i) {
    const double a = decode(f, p[i]);
    const float mid = static_cast<float>((a + decode(f, p[i + 1])) / 2);  // exact: one more bit than the format
    in.insert(in.end(), {static_cast<float>(a), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, FLT_MAX)});
  }
  const float max = static_cast<float>(ref.max_finite());
  in.insert(in.end(), {max, std::nextafter(max, FLT_MAX), FLT_MAX, std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::denorm_min(), FLT_MIN, std::nextafter(FLT_MIN, 0.0f), 0.0f, 65504.0f,
                       65519.996f, 65520.0f, 65536.0f, 1e-8f, 5.9604645e-08f, 2.9802322e-08f, 3e-08f});
  std::mt19937 gen(7);
  std::uniform_int_distribution<std::uint32_t> bits(0, 0x7F7FFFFFu);  // any finite positive float
  for (int i = 0; i < 200000; ++i)
    in.push_back(bits_float(bits(gen)));
  const std::size_t positives = in.size();
  for (std::size_t i = 0; i < positives; ++i)
    in.push_back(-in[i]);
  return in;
}

void expect_narrowing_rounds_to_nearest_even(const Format& f) {
  const NarrowingReference ref(f);
  const std::vector<float> in = narrowing_inputs(ref, f);
  std::vector<std::uint16_t> out(in.size());
  cast_from_f32(in.data(), out.data(), f.type, in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::uint16_t expected = ref.round(in[i]);
    ASSERT_EQ(out[i], expected) << "input " << in[i] << " (bits 0x" << std::hex << float_bits(in[i]) << ")";
    // The scalar conversion (used directly by the CPU communicator) must agree with the array cast.
    const std::uint16_t scalar = f.type == DType::BF16 ? float_to_bf16_bits(in[i]) : float_to_f16_bits(in[i]);
    ASSERT_EQ(scalar, expected) << "scalar, input " << in[i];
  }
}

TEST(CastTest, F32ToBf16RoundsToNearestEven) {
  expect_narrowing_rounds_to_nearest_even(kBf16);
}
TEST(CastTest, F32ToF16RoundsToNearestEven) {
  expect_narrowing_rounds_to_nearest_even(kF16);
}

TEST(CastTest, NaNStaysQuietNaNWithItsSign) {
  const float nans[] = {std::numeric_limits<float>::quiet_NaN(),
                        -std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::signaling_NaN(),
                        bits_float(0x7F800001u),
                        bits_float(0xFF800001u),
                        bits_float(0x7FFFFFFFu),
                        bits_float(0x7F802000u)};
  for (const Format& f : {kBf16, kF16}) {
    std::vector<std::uint16_t> out(std::size(nans));
    cast_from_f32(nans, out.data(), f.type, out.size());
    std::vector<float> back(out.size());
    cast_to_f32(out.data(), f.type, back.data(), out.size());
    const std::uint16_t quiet_bit = static_cast<std::uint16_t>(1u << (f.man_bits - 1));
    for (std::size_t i = 0; i < out.size(); ++i) {
      EXPECT_TRUE(std::isnan(decode(f, out[i]))) << "input bits 0x" << std::hex << float_bits(nans[i]);
      EXPECT_NE(out[i] & quiet_bit, 0) << "NaN must come out quiet, input bits 0x" << std::hex << float_bits(nans[i]);
      EXPECT_EQ(std::signbit(back[i]), std::signbit(nans[i]));
    }
  }
}

TEST(CastTest, F32ToF32CopiesBits) {
  const std::vector<float> in = test::random_floats(1001, -5.0f, 5.0f, 3);
  std::vector<float> out(in.size());
  cast_from_f32(in.data(), out.data(), DType::F32, in.size());
  EXPECT_EQ(out, in);
  std::vector<float> back(in.size());
  cpu::cast_to_f32(out.data(), DType::F32, back.data(), in.size());
  EXPECT_EQ(back, in);
}

TEST(CastTest, UnsupportedTypesAreRejected) {
  float f = 1.0f;
  std::int32_t i = 0;
  EXPECT_THROW(cast_to_f32(&i, DType::I32, &f, 1), UsageError);
  EXPECT_THROW(cast_from_f32(&f, &i, DType::I32, 1), UsageError);
  EXPECT_THROW(cast_from_f32(&f, nullptr, DType::BF16, 1), UsageError);
  EXPECT_NO_THROW(cast_from_f32(nullptr, nullptr, DType::BF16, 0));
}

}  // namespace
}  // namespace tenax::kernels
