// CUDA element-wise kernels and gemm against the CPU references (which are themselves checked against float64).
// Every case runs with aligned pointers (the 16-byte vector path) and with pointers offset by one element (the scalar
// path), on sizes that leave a tail.
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "cuda_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/kernels/cast.hpp"
#include "tenax/kernels/gemm.hpp"
#include "tenax/kernels/half.hpp"
#include "tenax/kernels/optimizer.hpp"
#include "tenax/kernels/reduction.hpp"
#include "tenax/kernels/unscale.hpp"

namespace tenax::kernels {
namespace {

using test::all_close;
using test::CudaKernelTest;
using test::DeviceBuffer;
using test::random_floats;
using test::to_double;

constexpr std::size_t kN = 100003;
constexpr std::size_t kOffsets[] = {0, 1};

using CudaElementwiseTest = CudaKernelTest;

std::vector<std::uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<std::uint32_t> b(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    b[i] = float_bits(v[i]);
  return b;
}

TEST_F(CudaElementwiseTest, CastsAreBitwiseEqualToTheCpu) {
  std::vector<float> in = random_floats(kN, -70000.0f, 70000.0f, 1);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::denorm_min(),
                            65520.0f,
                            1e-7f,
                            -0.0f,
                            3e38f};
  for (std::size_t i = 0; i < std::size(specials); ++i)
    in[i * 997] = specials[i];
  std::vector<std::uint16_t> all_patterns(65536);
  for (std::uint32_t i = 0; i < 65536; ++i)
    all_patterns[i] = static_cast<std::uint16_t>(i);
  for (DType t : {DType::BF16, DType::F16}) {
    for (std::size_t off : kOffsets) {
      std::vector<std::uint16_t> expected(kN);
      cpu::cast_from_f32(in.data(), expected.data(), t, kN);
      DeviceBuffer<float> d_in(in, off);
      DeviceBuffer<std::uint16_t> d_out(kN, off);
      cuda::cast_from_f32(d_in.get(), d_out.get(), t, kN, nullptr);
      EXPECT_EQ(d_out.download(), expected) << dtype_name(t) << " offset " << off;

      std::vector<float> widened(all_patterns.size());
      cpu::cast_to_f32(all_patterns.data(), t, widened.data(), widened.size());
      DeviceBuffer<std::uint16_t> d_patterns(all_patterns, off);
      DeviceBuffer<float> d_widened(all_patterns.size(), off);
      cuda::cast_to_f32(d_patterns.get(), t, d_widened.get(), all_patterns.size(), nullptr);
      EXPECT_EQ(bits_of(d_widened.download()), bits_of(widened)) << dtype_name(t) << " offset " << off;
    }
  }
}

TEST_F(CudaElementwiseTest, UnscaleMatchesTheCpuAndSetsTheSharedFlag) {
  for (std::size_t off : kOffsets) {
    std::vector<float> g = random_floats(kN, -1e3f, 1e3f, 2);
    DeviceBuffer<float> d_g(g, off);
    DeviceBuffer<float> d_flag(std::vector<float>{0.0f});
    float flag = 0.0f;
    cpu::unscale_and_check(g.data(), kN, 0.125f, &flag);
    cuda::unscale_and_check(d_g.get(), kN, 0.125f, d_flag.get(), nullptr);
    EXPECT_EQ(d_g.download(), g);
    EXPECT_EQ(d_flag.download()[0], 0.0f);

    for (std::size_t where : {std::size_t{0}, kN / 3, kN - 1}) {  // the last element lies in the scalar tail
      std::vector<float> bad = random_floats(kN, -1.0f, 1.0f, 3);
      bad[where] = std::numeric_limits<float>::infinity();
      DeviceBuffer<float> d_bad(bad, off);
      d_flag.upload({0.0f});
      cuda::unscale_and_check(d_bad.get(), kN, 0.5f, d_flag.get(), nullptr);
      EXPECT_EQ(d_flag.download()[0], 1.0f) << "inf at " << where << " offset " << off;
      // A factor of one: the check alone, the values left as they are.
      bad[where] = std::numeric_limits<float>::quiet_NaN();
      DeviceBuffer<float> d_nan(bad, off);
      d_flag.upload({0.0f});
      cuda::unscale_and_check(d_nan.get(), kN, 1.0f, d_flag.get(), nullptr);
      EXPECT_EQ(d_flag.download()[0], 1.0f) << "NaN at " << where << " offset " << off;
      EXPECT_EQ(bits_of(d_nan.download()), bits_of(bad)) << "offset " << off;
    }
  }
}

TEST_F(CudaElementwiseTest, AdamWMatchesTheCpuAndWritesTheLowPrecisionCopy) {
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    for (std::size_t off : kOffsets) {
      std::vector<float> w = random_floats(kN, -1.0f, 1.0f, 4), m = random_floats(kN, -0.1f, 0.1f, 5);
      std::vector<float> v = random_floats(kN, 0.0f, 0.01f, 6);
      const std::vector<float> g = random_floats(kN, -0.5f, 0.5f, 7);
      DeviceBuffer<float> d_w(w, off), d_m(m, off), d_v(v, off), d_g(g, off);
      DeviceBuffer<std::uint32_t> d_lowp(kN, off);  // wide enough for every lowp type
      const AdamWParams p{.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 7};
      cpu::adamw_step(w.data(), m.data(), v.data(), g.data(), nullptr, t, kN, p);
      cuda::adamw_step(d_w.get(), d_m.get(), d_v.get(), d_g.get(), d_lowp.get(), t, kN, p, nullptr);
      const std::vector<float> gw = d_w.download();
      // The device contracts a*b+c into FMAs: a few ulps of difference, far below the update size (~1e-3).
      EXPECT_TRUE(all_close(gw, to_double(w), 1e-6, 1e-7)) << dtype_name(t) << " offset " << off;
      EXPECT_TRUE(all_close(d_m.download(), to_double(m), 1e-6, 1e-8));
      EXPECT_TRUE(all_close(d_v.download(), to_double(v), 1e-6, 1e-12));
      std::vector<std::uint32_t> lowp = d_lowp.download();
      const auto* lowp16 = reinterpret_cast<const std::uint16_t*>(lowp.data());
      for (std::size_t i = 0; i < kN; ++i) {
        const std::uint32_t expected = t == DType::F32    ? float_bits(gw[i])
                                       : t == DType::BF16 ? float_to_bf16_bits(gw[i])
                                                          : float_to_f16_bits(gw[i]);
        const std::uint32_t got = t == DType::F32 ? lowp[i] : lowp16[i];
        ASSERT_EQ(got, expected) << dtype_name(t) << " element " << i;
      }
    }
  }
}

TEST_F(CudaElementwiseTest, SgdMomentumMatchesTheCpu) {
  for (bool nesterov : {false, true}) {
    for (std::size_t off : kOffsets) {
      std::vector<float> w = random_floats(kN, -1.0f, 1.0f, 8), vel = random_floats(kN, -0.1f, 0.1f, 9);
      const std::vector<float> g = random_floats(kN, -0.5f, 0.5f, 10);
      DeviceBuffer<float> d_w(w, off), d_vel(vel, off), d_g(g, off);
      DeviceBuffer<std::uint16_t> d_lowp(kN, off);
      const SgdParams p{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f, .nesterov = nesterov};
      std::vector<std::uint16_t> lowp(kN);
      cpu::sgd_momentum_step(w.data(), vel.data(), g.data(), lowp.data(), DType::BF16, kN, p);
      cuda::sgd_momentum_step(d_w.get(), d_vel.get(), d_g.get(), d_lowp.get(), DType::BF16, kN, p, nullptr);
      const std::vector<float> gw = d_w.download();
      EXPECT_TRUE(all_close(gw, to_double(w), 1e-6, 1e-7)) << "nesterov " << nesterov << " offset " << off;
      EXPECT_TRUE(all_close(d_vel.download(), to_double(vel), 1e-6, 1e-7));
      const std::vector<std::uint16_t> got = d_lowp.download();
      for (std::size_t i = 0; i < kN; ++i)
        ASSERT_EQ(got[i], float_to_bf16_bits(gw[i])) << "element " << i;
    }
  }
}

TEST_F(CudaElementwiseTest, SumSquaresAddsToTheDeviceTotal) {
  for (std::size_t off : kOffsets) {
    const std::vector<float> x = random_floats(kN, -2.0f, 2.0f, 11);
    DeviceBuffer<float> d_x(x, off);
    DeviceBuffer<double> d_sum(std::vector<double>{5.0});  // added to, not overwritten
    cuda::sum_squares(d_x.get(), kN, d_sum.get(), nullptr);
    const double expected = 5.0 + cpu::sum_squares(x.data(), kN);
    EXPECT_NEAR(d_sum.download()[0], expected, 1e-12 * expected) << "offset " << off;
  }
}

TEST_F(CudaElementwiseTest, GemmMatchesTheCpuForEveryTranspose) {
  const std::size_t m = 67, n = 45, k = 129, pad = 5;
  for (Trans ta : {Trans::No, Trans::Yes}) {
    for (Trans tb : {Trans::No, Trans::Yes}) {
      const bool a_t = ta == Trans::Yes, b_t = tb == Trans::Yes;
      const std::size_t lda = (a_t ? m : k) + pad, ldb = (b_t ? k : n) + pad, ldc = n + pad;
      const std::vector<float> a = random_floats((a_t ? k : m) * lda, -1.0f, 1.0f, 12);
      const std::vector<float> b = random_floats((b_t ? n : k) * ldb, -1.0f, 1.0f, 13);
      std::vector<float> c = random_floats(m * ldc, -1.0f, 1.0f, 14);
      DeviceBuffer<float> d_a(a), d_b(b), d_c(c);
      cpu::gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f, c.data(), ldc);
      cuda::gemm(ta, tb, m, n, k, 0.5f, d_a.get(), lda, d_b.get(), ldb, 2.0f, d_c.get(), ldc, nullptr);
      EXPECT_TRUE(all_close(d_c.download(), to_double(c), 1e-5, 2e-5)) << "ta " << a_t << " tb " << b_t;
    }
  }
}

TEST_F(CudaElementwiseTest, BadArgumentsAreRejectedBeforeAnyLaunch) {
  DeviceBuffer<float> d(16);
  EXPECT_THROW(
      cuda::adamw_step(d.get(), d.get(), d.get(), d.get(), nullptr, DType::F32, 16, AdamWParams{.step = 0}, nullptr),
      UsageError);
  EXPECT_THROW(cuda::cast_from_f32(d.get(), d.get(), DType::I64, 16, nullptr), UsageError);
  EXPECT_THROW(cuda::gemm(Trans::No, Trans::No, 4, 4, 4, 1.0f, d.get(), 2, d.get(), 4, 0.0f, d.get(), 4, nullptr),
               UsageError);
}

// The check macros work without a device: they only format the error.
TEST(CudaCheckTest, AFailedCallThrowsDeviceErrorNamingTheCallThePlaceAndTheError) {
  try {
    TENAX_CUDA_CHECK(cudaErrorInvalidValue);
    ADD_FAILURE() << "no exception";
  } catch (const DeviceError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;
    EXPECT_NE(what.find("cuda_vs_cpu_test.cpp:"), std::string::npos) << what;
  }
  try {
    TENAX_CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE);
    ADD_FAILURE() << "no exception";
  } catch (const DeviceError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("CUBLAS_STATUS_INVALID_VALUE"), std::string::npos) << what;
    EXPECT_NE(what.find("cuBLAS `CUBLAS_STATUS_INVALID_VALUE` failed at"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace tenax::kernels
