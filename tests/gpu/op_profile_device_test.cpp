// The op profile on a CUDA context (tenax/op_profile.hpp): timed with events on the compute stream, a 16-bit product's
// casts in rows of their own, rows that add up to the window and fit inside the host's wall time around it, and more
// boundaries than one batch of events holds (the read-back in the middle loses no call).
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/mpi_test.hpp"
#include "tenax/execution.hpp"
#include "tenax/ops.hpp"
#include "tensor/op_profiler.hpp"

namespace tenax::test {
namespace {

const OpProfileRow* find_row(const OpProfile& p, const std::string& op) {
  for (const OpProfileRow& r : p.rows)
    if (r.op == op) return &r;
  return nullptr;
}

class DeviceOpProfile : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) {
      if (gpu_required()) FAIL() << "TENAX_TEST_GPU=1 but no usable CUDA device";
      GTEST_SKIP() << "no CUDA device";
    }
    ctx_ = ExecutionContext::cuda(0);
  }
  std::unique_ptr<ExecutionContext> ctx_;
};

TEST_F(DeviceOpProfile, ProductsAndTheirCastsAreTimedWithEvents) {
  const std::size_t n = 2048;
  Tensor a = ctx_->zeros({n, n}, DType::F32), b = ctx_->zeros({n, n}, DType::F32), c = ctx_->zeros({n, n}, DType::F32);
  auto product = [&] {
    ops::gemm_mixed(*ctx_, DType::BF16, kernels::Trans::No, kernels::Trans::No, n, n, n, 1.0f, a.as<float>(), nullptr,
                    n, b.as<float>(), nullptr, n, 0.0f, c.as<float>(), n);
  };
  product();  // cuBLAS loads its kernel outside the window
  ctx_->synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  ctx_->begin_op_profile();
  for (int i = 0; i < 5; ++i)
    product();
  const OpProfile p = ctx_->end_op_profile();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  EXPECT_EQ(p.clock, "cuda events");
  const OpProfileRow* gemm = find_row(p, "gemm_mixed");
  const OpProfileRow* cast = find_row(p, "cast_from_f32");
  ASSERT_TRUE(gemm && cast);
  EXPECT_EQ(gemm->dtype, "bf16");
  EXPECT_EQ(gemm->calls, 5u);
  EXPECT_EQ(cast->calls, 10u);  // a and b, the same size: one row
  EXPECT_DOUBLE_EQ(gemm->flops, 5 * 2.0 * n * n * n);
  const double tflops = gemm->flops / gemm->seconds * 1e-12;
  std::printf(
      "gemm_mixed bf16 %zu^3: %.3f ms per call, %.0f TFLOP/s; casts %.3f ms per call; window %.3f ms, host %.3f "
      "ms\n",
      n, 1e3 * gemm->seconds / 5, tflops, 1e3 * cast->seconds / 10, 1e3 * p.seconds, 1e3 * wall);
  // A product this size takes tens of microseconds at least on any GPU tenax runs on; no GPU multiplies bf16 at
  // 10 PFLOP/s. Both bounds fail if the events measured the wrong interval (the enqueue only, or nothing).
  EXPECT_GT(tflops, 1.0);
  EXPECT_LT(tflops, 1e4);
  double sum = 0;
  for (const OpProfileRow& r : p.rows)
    sum += r.seconds;
  EXPECT_NEAR(sum, p.seconds, 1e-9);
  EXPECT_LE(p.seconds, wall);  // device intervals inside the host's wall time around them
}

// A linear layer's backward rounds its output gradient once for both products (dW and dx), with the bits of two
// gemm_mixed calls, also for an output gradient whose rows are padded (the output head's logits).
TEST_F(DeviceOpProfile, ALinearBackwardRoundsItsOutputGradientOnceWithTheBitsOfTwoProducts) {
  const std::size_t rows = 96, in = 80, out = 70, ld_dy = 128;
  auto filled = [&](std::size_t n, float seed) {
    std::vector<float> host(n);
    for (std::size_t i = 0; i < n; ++i)
      host[i] = static_cast<float>(((i * 7919 + static_cast<std::size_t>(seed * 13)) % 2001) / 1000.0 - 1.0);
    Tensor t = ctx_->empty({static_cast<std::int64_t>(n)}, DType::F32);
    ctx_->upload(t.data(), host.data(), n * sizeof(float));
    return t;
  };
  Tensor dy = filled(rows * ld_dy, 1), x = filled(rows * in, 2), w = filled(out * in, 3);
  Tensor dw_one = filled(out * in, 4), dw_two = filled(out * in, 4);
  Tensor dx_one = ctx_->zeros({static_cast<std::int64_t>(rows * in)}, DType::F32);
  Tensor dx_two = ctx_->zeros({static_cast<std::int64_t>(rows * in)}, DType::F32);
  using kernels::Trans;
  ops::gemm_mixed(*ctx_, DType::BF16, Trans::Yes, Trans::No, out, in, rows, 1.0f, dy.as<float>(), nullptr, ld_dy,
                  x.as<float>(), nullptr, in, 1.0f, dw_two.as<float>(), in);
  ops::gemm_mixed(*ctx_, DType::BF16, Trans::No, Trans::No, rows, in, out, 1.0f, dy.as<float>(), nullptr, ld_dy,
                  w.as<float>(), nullptr, in, 0.0f, dx_two.as<float>(), in);
  ctx_->begin_op_profile();
  ops::linear_backward_mixed(*ctx_, DType::BF16, rows, in, out, dy.as<float>(), ld_dy, x.as<float>(), w.as<float>(),
                             nullptr, dw_one.as<float>(), dx_one.as<float>());
  const OpProfile p = ctx_->end_op_profile();
  const OpProfileRow* gemm = find_row(p, "gemm_mixed");
  ASSERT_TRUE(gemm);
  std::size_t casts = 0, products = 0;
  for (const OpProfileRow& r : p.rows) {
    if (r.op == "cast_from_f32") casts += r.calls;
    if (r.op == "gemm_mixed") products += r.calls;
  }
  EXPECT_EQ(products, 2u);
  EXPECT_EQ(casts, 3u) << "dy once, x and w (no 16-bit copy given) once each";
  auto host = [&](const Tensor& t) {
    std::vector<float> v(static_cast<std::size_t>(t.numel()));
    ctx_->download(v.data(), t.data(), v.size() * sizeof(float));
    return v;
  };
  EXPECT_EQ(host(dw_one), host(dw_two));
  EXPECT_EQ(host(dx_one), host(dx_two));
}

TEST_F(DeviceOpProfile, MoreBoundariesThanOneBatchOfEventsLosesNoCall) {
  Tensor x = ctx_->zeros({256}, DType::F32), y = ctx_->zeros({256}, DType::F32);
  ctx_->begin_op_profile();
  for (int i = 0; i < 10000; ++i)  // 20000 boundaries: one read-back of the events in the middle
    ops::add_inplace(*ctx_, y.as<float>(), x.as<float>(), 256);
  const OpProfile p = ctx_->end_op_profile();
  const OpProfileRow* add = find_row(p, "add_inplace");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->calls, 10000u);
  EXPECT_GT(add->seconds, 0.0);
}

// What the engine does at every step's end (collect(): read back the completed events without waiting), then a
// stretch of more boundaries than the pool holds (the host waits once, mid-stretch): every call is charged, the rows
// add up to the window, and the window fits inside the host's wall time around it.
TEST_F(DeviceOpProfile, ReadBacksAtStepEndsAndAFullPoolChargeEveryCall) {
  Tensor x = ctx_->zeros({4096}, DType::F32), y = ctx_->zeros({4096}, DType::F32);
  ctx_->synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  ctx_->begin_op_profile();
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 1500; ++i)
      ops::add_inplace(*ctx_, y.as<float>(), x.as<float>(), 4096);
    ctx_->synchronize();
    ctx_->op_profiler()->collect();
  }
  for (int i = 0; i < 9000; ++i)  // 18000 boundaries since the last collect()
    ops::add_inplace(*ctx_, y.as<float>(), x.as<float>(), 4096);
  const OpProfile p = ctx_->end_op_profile();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const OpProfileRow* add = find_row(p, "add_inplace");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->calls, 13500u);
  EXPECT_GT(add->seconds, 0.0);
  double sum = 0;
  for (const OpProfileRow& r : p.rows)
    sum += r.seconds;
  EXPECT_NEAR(sum, p.seconds, 1e-9);
  EXPECT_LE(p.seconds, wall);
  std::printf("13500 add_inplace of 4096 floats: %.2f us each on the device; window %.3f ms, host %.3f ms\n",
              1e6 * add->seconds / 13500, 1e3 * p.seconds, 1e3 * wall);
}

}  // namespace
}  // namespace tenax::test
