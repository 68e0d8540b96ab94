// The op profile (tenax/op_profile.hpp): exclusive time per op with nesting, on a clock the test moves by hand; and on
// the host context, through tenax::ops: calls, counted work and rows that add up to the window.
#include <gtest/gtest.h>

#include <vector>

#include "tenax/error.hpp"
#include "tenax/execution.hpp"
#include "tenax/ops.hpp"
#include "tensor/op_profiler.hpp"

namespace tenax {
namespace {

const OpProfileRow* find_row(const OpProfile& p, const std::string& op, const std::string& shape = "") {
  for (const OpProfileRow& r : p.rows)
    if (r.op == op && (shape.empty() || r.shape == shape)) return &r;
  return nullptr;
}

TEST(OpProfiler, ChargesEachIntervalToTheInnermostOpenOp) {
  double now = 10.0;
  detail::OpProfiler profiler(nullptr, [&now] { return now; });
  now = 11.0;  // 1 s before the first op: between ops
  profiler.enter(detail::op_key("outer", {8, 4}), 100, 0);
  now = 13.0;  // outer alone: 2 s
  profiler.enter(detail::op_key("inner", {3}), 0, 50);
  now = 17.0;  // inner: 4 s
  profiler.leave();
  now = 18.0;  // outer again: 1 s
  profiler.leave();
  now = 18.5;  // between: 0.5 s
  profiler.enter(detail::op_key("inner", {3}), 0, 50);
  now = 19.0;  // inner: 0.5 s
  profiler.leave();
  profiler.enter(detail::op_key("inner", {4}), 0, 7);  // another shape: another row
  now = 19.25;
  profiler.leave();
  now = 20.0;  // between: 0.75 s
  const OpProfile p = profiler.finish();

  EXPECT_EQ(p.clock, "host clock");
  EXPECT_DOUBLE_EQ(p.seconds, 10.0);
  ASSERT_EQ(p.rows.size(), 4u);
  const OpProfileRow* inner = find_row(p, "inner", "3");
  const OpProfileRow* outer = find_row(p, "outer");
  const OpProfileRow* between = find_row(p, "(between ops)");
  ASSERT_TRUE(inner && outer && between && find_row(p, "inner", "4"));
  EXPECT_DOUBLE_EQ(inner->seconds, 4.5);
  EXPECT_EQ(inner->calls, 2u);
  EXPECT_DOUBLE_EQ(inner->bytes, 100.0);
  EXPECT_DOUBLE_EQ(outer->seconds, 3.0);
  EXPECT_EQ(outer->shape, "8x4");
  EXPECT_DOUBLE_EQ(outer->flops, 100.0);
  EXPECT_DOUBLE_EQ(between->seconds, 2.25);
  EXPECT_DOUBLE_EQ(find_row(p, "inner", "4")->seconds, 0.25);
  // The most time first.
  EXPECT_EQ(p.rows.front().op, "inner");
  EXPECT_EQ(p.rows.back().shape, "4");
}

TEST(OpProfile, HostOpsAreCountedAndTheRowsAddUpToTheWindow) {
  ExecutionContext& ctx = ExecutionContext::host();
  const std::size_t m = 64, n = 48, k = 32;
  std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f), c(m * n, 0.0f);
  std::vector<float> x(16 * 40, 1.0f), y(x.size()), mean(16), rstd(16), gamma(40, 1.0f), beta(40, 0.0f);

  ctx.begin_op_profile();
  for (int i = 0; i < 3; ++i)
    ops::gemm(ctx, kernels::Trans::No, kernels::Trans::Yes, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
  for (int i = 0; i < 2; ++i)
    ops::layernorm_forward(ctx, x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), 16, 40, 1e-5f);
  // On the host, a 16-bit product is the fp32 product: one gemm row, no gemm_mixed row.
  ops::gemm_mixed(ctx, DType::BF16, kernels::Trans::No, kernels::Trans::Yes, m, n, k, 1.0f, a.data(), nullptr, k,
                  b.data(), nullptr, k, 0.0f, c.data(), n);
  // round_to_dtype is made of two casts, each its own row.
  ops::round_to_dtype(ctx, y.data(), y.size(), DType::BF16);
  const OpProfile p = ctx.end_op_profile();

  EXPECT_EQ(p.clock, "host clock");
  const OpProfileRow* gemm = find_row(p, "gemm", "NT 64x48x32");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->calls, 4u);
  EXPECT_DOUBLE_EQ(gemm->flops, 4 * 2.0 * m * n * k);
  EXPECT_EQ(find_row(p, "gemm_mixed"), nullptr);
  const OpProfileRow* norm = find_row(p, "layernorm_forward", "16x40");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->calls, 2u);
  EXPECT_DOUBLE_EQ(norm->bytes, 2 * 8.0 * 16 * 40);
  const OpProfileRow* to16 = find_row(p, "cast_from_f32", "640");
  const OpProfileRow* back = find_row(p, "cast_to_f32", "640");
  ASSERT_TRUE(to16 && back);
  EXPECT_EQ(to16->dtype, "bf16");
  EXPECT_EQ(to16->calls, 1u);
  EXPECT_EQ(back->calls, 1u);
  double sum = 0;
  for (const OpProfileRow& r : p.rows) {
    EXPECT_GE(r.seconds, 0.0) << r.op;
    sum += r.seconds;
  }
  EXPECT_GT(gemm->seconds, 0.0);
  EXPECT_NEAR(sum, p.seconds, 1e-12 * p.seconds);

  // The table names every row.
  const std::string table = format_op_profile(p, 2);
  EXPECT_NE(table.find("over 2 step(s)"), std::string::npos) << table;
  EXPECT_NE(table.find("layernorm_forward"), std::string::npos) << table;
  EXPECT_NE(table.find("cast_from_f32 bf16"), std::string::npos) << table;
}

TEST(OpProfile, OpsOutsideAProfileAreNotTimedAndEndingWithoutOneIsRefused) {
  ExecutionContext& ctx = ExecutionContext::host();
  EXPECT_EQ(ctx.op_profiler(), nullptr);
  EXPECT_THROW(ctx.end_op_profile(), UsageError);
  ctx.begin_op_profile();
  ctx.begin_op_profile();  // starts over
  std::vector<float> v(100, 1.0f), w(100, 2.0f);
  ops::add_inplace(ctx, v.data(), w.data(), v.size());
  const OpProfile p = ctx.end_op_profile();
  ASSERT_NE(find_row(p, "add_inplace"), nullptr);
  EXPECT_EQ(find_row(p, "add_inplace")->calls, 1u);
  EXPECT_EQ(ctx.op_profiler(), nullptr);
  ops::add_inplace(ctx, v.data(), w.data(), v.size());  // not profiled, nothing to end
  EXPECT_THROW(ctx.end_op_profile(), UsageError);
}

}  // namespace
}  // namespace tenax
