// The execution context on the host and the kernel dispatch (tenax/ops.hpp): the host path must be exactly the CPU
// reference kernels (the bitwise reproducibility of CPU training depends on it), and asking for a GPU where there is
// none must be a UsageError that names the fix. The device side is tested in tests/gpu.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/execution.hpp"
#include "tenax/kernels/activation.hpp"
#include "tenax/kernels/gemm.hpp"
#include "tenax/kernels/layernorm.hpp"
#include "tenax/model_state.hpp"
#include "tenax/ops.hpp"
#include "tenax/precision.hpp"

namespace tenax {
namespace {

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v)
    x = dist(gen);
  return v;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ExecutionContext, TheHostContextIsSynchronousHostMemory) {
  ExecutionContext& host = ExecutionContext::host();
  EXPECT_EQ(&host, &ExecutionContext::host()) << "one process-wide host context";
  EXPECT_EQ(host.device(), Device::Host);
  EXPECT_FALSE(host.on_device());
  EXPECT_EQ(host.device_index(), -1);
  EXPECT_EQ(host.stream(), nullptr);
  EXPECT_EQ(host.blas_handle(), nullptr);
  EXPECT_EQ(host.describe(), "host");
  EXPECT_EQ(host.device_uuid(), "");

  Tensor t = host.zeros({4}, DType::F32);
  EXPECT_EQ(t.device(), Device::Host);
  const float values[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  host.upload(t.data(), values, sizeof values);
  Tensor u = host.empty({4}, DType::F32);
  host.copy(u.data(), t.data(), t.nbytes());
  float back[4] = {};
  host.download(back, u.data(), sizeof back);
  EXPECT_EQ(std::memcmp(back, values, sizeof back), 0);
  host.zero(u.data(), u.nbytes());
  EXPECT_EQ(u.f32()[3], 0.0f);
  host.synchronize();
  host.activate();
}

TEST(ExecutionContext, AskingForAGpuWhereThereIsNoneIsAUsageErrorNamingTheFix) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU: tests/gpu covers the device context";
  if (env::get_bool("TENAX_TEST_GPU")) FAIL() << "TENAX_TEST_GPU=1 but no usable CUDA device";
  try {
    (void)ExecutionContext::cuda(0);
    ADD_FAILURE() << "no exception";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--device cpu"), std::string::npos) << what;
  }
}

TEST(ExecutionContext, HostDispatchIsTheCpuReferenceBitForBit) {
  ExecutionContext& host = ExecutionContext::host();
  const std::size_t m = 13, n = 9, k = 21;
  const std::vector<float> a = random_floats(m * k, 1), b = random_floats(n * k, 2), c0 = random_floats(m * n, 3);
  std::vector<float> expected = c0, got = c0, mixed = c0;
  kernels::cpu::gemm(kernels::Trans::No, kernels::Trans::Yes, m, n, k, 0.5f, a.data(), k, b.data(), k, 1.0f,
                     expected.data(), n);
  ops::gemm(host, kernels::Trans::No, kernels::Trans::Yes, m, n, k, 0.5f, a.data(), k, b.data(), k, 1.0f, got.data(),
            n);
  EXPECT_TRUE(bitwise_equal(got, expected));
  // The CPU computes every policy in fp32: a 16-bit input type changes nothing on the host.
  ops::gemm_mixed(host, DType::BF16, kernels::Trans::No, kernels::Trans::Yes, m, n, k, 0.5f, a.data(), nullptr, k,
                  b.data(), nullptr, k, 1.0f, mixed.data(), n);
  EXPECT_TRUE(bitwise_equal(mixed, expected));

  const std::size_t rows = 7, cols = 24;
  const std::vector<float> x = random_floats(rows * cols, 4), gamma = random_floats(cols, 5),
                           beta = random_floats(cols, 6);
  std::vector<float> y1(rows * cols), y2(rows * cols), mean1(rows), mean2(rows), rstd1(rows), rstd2(rows);
  kernels::cpu::layernorm_forward(x.data(), gamma.data(), beta.data(), y1.data(), mean1.data(), rstd1.data(), rows,
                                  cols, 1e-5f);
  ops::layernorm_forward(host, x.data(), gamma.data(), beta.data(), y2.data(), mean2.data(), rstd2.data(), rows, cols,
                         1e-5f);
  EXPECT_TRUE(bitwise_equal(y1, y2));
  EXPECT_TRUE(bitwise_equal(rstd1, rstd2));

  std::vector<float> g1(rows * cols), g2(rows * cols);
  kernels::cpu::bias_gelu_forward(x.data(), gamma.data(), g1.data(), rows, cols);
  ops::bias_gelu_forward(host, x.data(), gamma.data(), g2.data(), rows, cols);
  EXPECT_TRUE(bitwise_equal(g1, g2));

  for (DType t : {DType::BF16, DType::F16}) {
    std::vector<float> r1 = x, r2 = x;
    std::vector<std::uint16_t> scratch(x.size());
    round_to_dtype(r1.data(), r1.size(), t, scratch.data());
    ops::round_to_dtype(host, r2.data(), r2.size(), t);
    EXPECT_TRUE(bitwise_equal(r1, r2)) << dtype_name(t);
    EXPECT_FALSE(bitwise_equal(r2, x)) << "random values are not all representable in " << dtype_name(t);
  }
}

TEST(ExecutionContext, AHostStateMirrorPassesHostEntriesThrough) {
  std::vector<float> values = {1.0f, 2.0f, 3.0f};
  StateEntry e;
  e.name = "param/w";
  e.global_shape = e.shape = {3};
  e.offset = {0};
  e.data = values.data();
  HostStateMirror mirror({e}, ExecutionContext::host());
  ASSERT_EQ(mirror.host_entries().size(), 1u);
  EXPECT_EQ(mirror.host_entries()[0].data, values.data()) << "host entries need no copy";
  mirror.pull();
  mirror.push();
  EXPECT_EQ(values[2], 3.0f);
}

}  // namespace
}  // namespace tenax
