// CUDA attention kernels against the CPU references: head split/merge (exact), the causal softmax and its backward, the
// strided-batched products in fp32 and 16-bit, the whole core (fp32 with saved and recomputed probabilities, bf16 and
// f16), masking exactness on the device, and the device dispatch through ops. Shapes take the 16-byte vector paths
// (D and T multiples of 4) and the scalar ones (odd sizes, unaligned pointers). The argument checks at the end run
// without a GPU: they throw before any CUDA call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attention_reference.hpp"
#include "cuda_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/execution.hpp"
#include "tenax/kernels/attention.hpp"
#include "tenax/kernels/batched_gemm.hpp"
#include "tenax/kernels/cast.hpp"
#include "tenax/ops.hpp"

namespace tenax::kernels {
namespace {

using test::all_close;
using test::AttentionSize;
using test::CudaKernelTest;
using test::DeviceBuffer;
using test::random_floats;
using test::relative_error;
using test::widen;

using CudaAttentionTest = CudaKernelTest;

TEST_F(CudaAttentionTest, HeadSplitAndMergeMatchTheCpuExactly) {
  for (auto [n, offset] : {std::pair{AttentionSize{2, 3, 17, 8}, std::size_t{0}},    // 16-byte vectors
                           std::pair{AttentionSize{2, 3, 17, 8}, std::size_t{1}},    // unaligned: scalar path
                           std::pair{AttentionSize{3, 2, 9, 5}, std::size_t{0}}}) {  // odd D: scalar path
    const std::size_t e = n.head_elems();
    const std::vector<float> qkv = random_floats(3 * e, -1.0f, 1.0f, 1), o = random_floats(e, -1.0f, 1.0f, 2);
    std::vector<float> q(e), k(e), v(e), y(e), back(3 * e), d_o(e);
    cpu::split_heads(qkv.data(), q.data(), k.data(), v.data(), n.B, n.H, n.T, n.D);
    cpu::merge_heads(o.data(), y.data(), n.B, n.H, n.T, n.D);
    cpu::split_heads_backward(k.data(), v.data(), q.data(), back.data(), n.B, n.H, n.T, n.D);  // permuted on purpose
    cpu::merge_heads_backward(y.data(), d_o.data(), n.B, n.H, n.T, n.D);
    DeviceBuffer<float> g_qkv(qkv, offset), g_q(e, offset), g_k(e, offset), g_v(e, offset), g_o(o, offset),
        g_y(e, offset), g_back(3 * e, offset), g_do(e, offset);
    cuda::split_heads(g_qkv.get(), g_q.get(), g_k.get(), g_v.get(), n.B, n.H, n.T, n.D, nullptr);
    cuda::merge_heads(g_o.get(), g_y.get(), n.B, n.H, n.T, n.D, nullptr);
    cuda::split_heads_backward(g_k.get(), g_v.get(), g_q.get(), g_back.get(), n.B, n.H, n.T, n.D, nullptr);
    cuda::merge_heads_backward(g_y.get(), g_do.get(), n.B, n.H, n.T, n.D, nullptr);
    EXPECT_EQ(g_q.download(), q) << "D " << n.D << " offset " << offset;
    EXPECT_EQ(g_k.download(), k);
    EXPECT_EQ(g_v.download(), v);
    EXPECT_EQ(g_y.download(), y);
    EXPECT_EQ(g_back.download(), back);
    EXPECT_EQ(g_do.download(), d_o);
  }
}

// The same formulas in fp32 on both sides (expf vs the CPU's polynomial, warp vs lane sums): a few ulp of values <= 1.
// Masked entries are exactly 0, and the NaN planted above the diagonal is never read.
// Rows up to 1024 columns are kept in registers, longer ones take two passes over memory: both kinds, with and without
// 16-byte vectors.
TEST_F(CudaAttentionTest, CausalSoftmaxForwardAndBackwardMatchTheCpu) {
  for (std::size_t T : {128, 37, 1024, 1100, 1029}) {
    const std::size_t blocks = T > 128 ? 2 : 6;
    const float scale = 0.3f;
    std::vector<float> s = random_floats(blocks * T * T, -20.0f, 20.0f, 3);
    std::vector<float> dp = random_floats(blocks * T * T, -1.0f, 1.0f, 4);
    for (std::size_t r = 0; r < blocks * T; ++r)
      for (std::size_t j = r % T + 1; j < T; ++j)
        s[r * T + j] = dp[r * T + j] = std::numeric_limits<float>::quiet_NaN();
    DeviceBuffer<float> g_s(s), g_dp(dp), g_ds(s.size());
    cpu::causal_softmax_forward(s.data(), blocks, T, scale);
    cuda::causal_softmax_forward(g_s.get(), blocks, T, scale, nullptr);
    const std::vector<float> p = g_s.download();
    EXPECT_TRUE(all_close(p, widen(s), 0.0, 1e-6)) << "T " << T;
    for (std::size_t r = 0; r < blocks * T; ++r)
      for (std::size_t j = r % T + 1; j < T; ++j)
        ASSERT_EQ(p[r * T + j], 0.0f) << r << " " << j;
    std::vector<float> ds(s.size());
    cpu::causal_softmax_backward(s.data(), dp.data(), ds.data(), blocks, T, scale);
    cuda::causal_softmax_backward(g_s.get(), g_dp.get(), g_ds.get(), blocks, T, scale, nullptr);
    EXPECT_TRUE(all_close(g_ds.download(), widen(ds), 0.0, 1e-6)) << "T " << T;
    cuda::causal_softmax_backward(g_s.get(), g_dp.get(), g_dp.get(), blocks, T, scale, nullptr);
    EXPECT_EQ(g_dp.download(), g_ds.download()) << "in place gives the same bits";
  }
}

// Non-finite scores as on the CPU: NaN or +inf makes the row NaN, -inf (first in its lane or not) gets probability 0.
TEST_F(CudaAttentionTest, CausalSoftmaxTreatsNonFiniteScoresAsTheCpu) {
  const std::size_t T = 40;
  std::vector<float> s = random_floats(T * T, -2.0f, 2.0f, 19);
  s[10 * T + 3] = std::numeric_limits<float>::quiet_NaN();
  s[12 * T + 12] = INFINITY;
  s[15 * T + 0] = -INFINITY;
  s[20 * T + 4] = -INFINITY;
  DeviceBuffer<float> g_s(s);
  cpu::causal_softmax_forward(s.data(), 1, T, 0.5f);
  cuda::causal_softmax_forward(g_s.get(), 1, T, 0.5f, nullptr);
  const std::vector<float> p = g_s.download();
  for (std::size_t i = 0; i < s.size(); ++i) {
    ASSERT_EQ(std::isnan(p[i]), std::isnan(s[i])) << "row " << i / T << " column " << i % T;
    if (!std::isnan(s[i])) {
      ASSERT_NEAR(p[i], s[i], 1e-6) << "row " << i / T << " column " << i % T;
    }
  }
  EXPECT_EQ(p[15 * T + 0], 0.0f);
  EXPECT_EQ(p[20 * T + 4], 0.0f);
}

TEST_F(CudaAttentionTest, BatchedGemmMatchesTheCpuInFp32And16Bit) {
  const std::size_t m = 33, n = 20, k = 65, batch = 5;
  void* handle = cuda::create_blas_handle();
  for (DType type : {DType::F32, DType::BF16, DType::F16})
    for (Trans ta : {Trans::No, Trans::Yes})
      for (Trans tb : {Trans::No, Trans::Yes}) {
        const bool a_t = ta == Trans::Yes, b_t = tb == Trans::Yes;
        const std::size_t lda = (a_t ? m : k) + 1, ldb = (b_t ? k : n) + 2, ldc = n + 3;
        const std::size_t sa = (a_t ? k : m) * lda, sb = 0, sc = m * ldc + 4;  // b shared by every product
        std::vector<float> a = random_floats(batch * sa, -1.0f, 1.0f, 5);
        std::vector<float> b = random_floats((b_t ? n : k) * ldb, -1.0f, 1.0f, 6);
        std::vector<float> c = random_floats(batch * sc, -1.0f, 1.0f, 7);
        DeviceBuffer<float> g_c(c);
        if (type == DType::F32) {
          DeviceBuffer<float> g_a(a), g_b(b);
          cuda::batched_gemm(ta, tb, m, n, k, 0.5f, g_a.get(), lda, sa, g_b.get(), ldb, sb, 1.0f, g_c.get(), ldc, sc,
                             batch, nullptr, handle);
        } else {
          // Products of 16-bit values are exact in fp32: compare with the fp32 CPU product of the rounded values.
          std::vector<std::uint16_t> a16(a.size()), b16(b.size());
          cast_from_f32(a.data(), a16.data(), type, a.size());
          cast_from_f32(b.data(), b16.data(), type, b.size());
          cast_to_f32(a16.data(), type, a.data(), a.size());
          cast_to_f32(b16.data(), type, b.data(), b.size());
          DeviceBuffer<std::uint16_t> g_a(a16), g_b(b16);
          cuda::batched_gemm_lowp(type, ta, tb, m, n, k, 0.5f, g_a.get(), lda, sa, g_b.get(), ldb, sb, 1.0f, g_c.get(),
                                  ldc, sc, batch, nullptr, handle);
        }
        cpu::batched_gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, sa, b.data(), ldb, sb, 1.0f, c.data(), ldc, sc, batch);
        EXPECT_TRUE(all_close(g_c.download(), widen(c), 1e-5, 2e-5))
            << dtype_name(type) << " ta " << a_t << " tb " << b_t;
      }
  cuda::destroy_blas_handle(handle);
}

struct CoreRun {
  std::vector<float> out, dq, dk, dv;
};

// The whole core on the device (workspace sized by the query functions), with or without saved probabilities.
CoreRun run_device(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                   const std::vector<float>& d_out, const AttentionSize& n, float scale, DType type, bool save) {
  DeviceBuffer<float> g_q(q), g_k(k), g_v(v), g_do(d_out), g_out(n.head_elems()), g_dq(n.head_elems()),
      g_dk(n.head_elems()), g_dv(n.head_elems()), g_p(save ? n.score_elems() : 1);
  float* probs = save ? g_p.get() : nullptr;
  const std::size_t fwd = cuda::attention_forward_workspace_bytes(n.B, n.H, n.T, n.D, type, save);
  const std::size_t bwd = cuda::attention_backward_workspace_bytes(n.B, n.H, n.T, n.D, type, save);
  DeviceBuffer<unsigned char> ws(std::max<std::size_t>({fwd, bwd, 1}));
  void* handle = cuda::create_blas_handle();
  cuda::attention_forward(g_q.get(), g_k.get(), g_v.get(), g_out.get(), probs, n.B, n.H, n.T, n.D, scale, type,
                          ws.get(), fwd, nullptr, handle);
  cuda::attention_backward(g_q.get(), g_k.get(), g_v.get(), g_do.get(), probs, g_dq.get(), g_dk.get(), g_dv.get(), n.B,
                           n.H, n.T, n.D, scale, type, ws.get(), bwd, nullptr, handle);
  CoreRun r{g_out.download(), g_dq.download(), g_dk.download(), g_dv.download()};
  cuda::destroy_blas_handle(handle);
  return r;
}

TEST_F(CudaAttentionTest, CoreMatchesTheCpuAndRecomputesTheSameBits) {
  for (const AttentionSize& n : {AttentionSize{2, 3, 64, 16}, AttentionSize{2, 2, 37, 7}}) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(n.D));
    const std::vector<float> q = random_floats(n.head_elems(), -1.0f, 1.0f, 8),
                             k = random_floats(n.head_elems(), -1.0f, 1.0f, 9),
                             v = random_floats(n.head_elems(), -1.0f, 1.0f, 10),
                             d_out = random_floats(n.head_elems(), -1.0f, 1.0f, 11);
    std::vector<float> out(n.head_elems()), dq(out.size()), dk(out.size()), dv(out.size());
    cpu::attention_forward(q.data(), k.data(), v.data(), out.data(), nullptr, n.B, n.H, n.T, n.D, scale);
    cpu::attention_backward(q.data(), k.data(), v.data(), d_out.data(), nullptr, dq.data(), dk.data(), dv.data(), n.B,
                            n.H, n.T, n.D, scale);
    const CoreRun saved = run_device(q, k, v, d_out, n, scale, DType::F32, true);
    const CoreRun recomputed = run_device(q, k, v, d_out, n, scale, DType::F32, false);
    EXPECT_TRUE(all_close(saved.out, widen(out), 1e-5, 2e-5)) << "T " << n.T;
    EXPECT_TRUE(all_close(saved.dq, widen(dq), 1e-5, 2e-5)) << "T " << n.T;
    EXPECT_TRUE(all_close(saved.dk, widen(dk), 1e-5, 2e-5)) << "T " << n.T;
    EXPECT_TRUE(all_close(saved.dv, widen(dv), 1e-5, 2e-5)) << "T " << n.T;
    EXPECT_EQ(recomputed.out, saved.out);
    EXPECT_EQ(recomputed.dq, saved.dq);
    EXPECT_EQ(recomputed.dk, saved.dk);
    EXPECT_EQ(recomputed.dv, saved.dv);

    // 16-bit operands (q, k, v, P, dO, dS rounded once each, fp32 accumulation): against float64, a relative error of
    // a few unit roundoffs (bf16 2^-8, f16 2^-11) from the analysis; to be confirmed by the first GPU run.
    const test::RefGrads g = test::ref_attention_backward(widen(q), widen(k), widen(v), widen(d_out), n, scale);
    const std::vector<double> ref_out = test::ref_attention_forward(widen(q), widen(k), widen(v), n, scale).out;
    for (auto [type, bound] : {std::pair{DType::BF16, 2e-2}, std::pair{DType::F16, 4e-3}})
      for (bool save : {true, false}) {
        const CoreRun r = run_device(q, k, v, d_out, n, scale, type, save);
        EXPECT_LT(relative_error(r.out, ref_out), bound) << dtype_name(type) << " T " << n.T;
        EXPECT_LT(relative_error(r.dq, g.dq), bound) << dtype_name(type) << " T " << n.T;
        EXPECT_LT(relative_error(r.dk, g.dk), bound) << dtype_name(type) << " T " << n.T;
        EXPECT_LT(relative_error(r.dv, g.dv), bound) << dtype_name(type) << " T " << n.T;
      }
  }
}

// No leakage from the future on the device either: the full T x T products multiply the masked probabilities (exact
// zeros) with the changed keys and values, which adds exact zeros.
TEST_F(CudaAttentionTest, FuturePositionsDoNotReachEarlierOutputs) {
  const AttentionSize n{2, 2, 64, 8};
  const std::vector<float> q = random_floats(n.head_elems(), -1.0f, 1.0f, 12),
                           k = random_floats(n.head_elems(), -1.0f, 1.0f, 13),
                           v = random_floats(n.head_elems(), -1.0f, 1.0f, 14),
                           d_out = random_floats(n.head_elems(), -1.0f, 1.0f, 15);
  const CoreRun base = run_device(q, k, v, d_out, n, 0.35f, DType::F32, true);
  const std::size_t t0 = 40;
  std::vector<float> k2 = k, v2 = v;
  const std::vector<float> noise = random_floats(n.head_elems(), -1e4f, 1e4f, 16);
  for (std::size_t bh = 0; bh < n.heads(); ++bh)
    for (std::size_t t = t0 + 1; t < n.T; ++t)
      for (std::size_t d = 0; d < n.D; ++d) {
        k2[(bh * n.T + t) * n.D + d] = noise[(bh * n.T + t) * n.D + d];
        v2[(bh * n.T + t) * n.D + d] = -noise[(bh * n.T + t) * n.D + d];
      }
  const CoreRun changed = run_device(q, k2, v2, d_out, n, 0.35f, DType::F32, true);
  for (std::size_t bh = 0; bh < n.heads(); ++bh)
    for (std::size_t t = 0; t <= t0; ++t)
      for (std::size_t d = 0; d < n.D; ++d) {
        const std::size_t i = (bh * n.T + t) * n.D + d;
        ASSERT_EQ(changed.out[i], base.out[i]) << "head " << bh << " position " << t;
        ASSERT_EQ(changed.dq[i], base.dq[i]) << "head " << bh << " position " << t;
      }
}

// ops on a CUDA context: the workspace comes from the context, the result follows the host path.
TEST_F(CudaAttentionTest, DeviceDispatchThroughOpsMatchesTheHost) {
  const AttentionSize n{2, 2, 48, 16};
  auto ctx = ExecutionContext::cuda(0);
  ExecutionContext& host = ExecutionContext::host();
  const std::vector<float> qkv = random_floats(3 * n.head_elems(), -1.0f, 1.0f, 17);
  const std::vector<float> dy = random_floats(n.head_elems(), -1.0f, 1.0f, 18);
  // The layer's sequence: split, core forward (recomputing), merge; then the backward of each in reverse.
  auto run = [&](ExecutionContext& c, const std::vector<float>& in_qkv, const std::vector<float>& in_dy) {
    const std::size_t e = n.head_elems();
    // 16 head-sized tensors below (qkv and dqkv are 3 each); take() refuses to run past the end.
    const std::size_t total = 16 * e;
    Tensor t = c.empty({static_cast<std::int64_t>(total)}, DType::F32);
    float* const begin = static_cast<float*>(t.data());
    float* next = begin;
    auto take = [&](std::size_t count) {
      if (static_cast<std::size_t>(next - begin) + count > total) throw std::logic_error("test buffer too small");
      return std::exchange(next, next + count);
    };
    float *qkv_d = take(3 * e), *q = take(e), *k = take(e), *v = take(e), *o = take(e), *y = take(e), *dy_d = take(e);
    float *d_o = take(e), *dq = take(e), *dk = take(e), *dv = take(e), *dqkv = take(3 * e);
    c.upload(qkv_d, in_qkv.data(), 3 * e * sizeof(float));
    c.upload(dy_d, in_dy.data(), e * sizeof(float));
    ops::split_heads(c, qkv_d, q, k, v, n.B, n.H, n.T, n.D);
    ops::attention_forward(c, q, k, v, o, nullptr, n.B, n.H, n.T, n.D, 0.25f);
    ops::merge_heads(c, o, y, n.B, n.H, n.T, n.D);
    ops::merge_heads_backward(c, dy_d, d_o, n.B, n.H, n.T, n.D);
    ops::attention_backward(c, q, k, v, d_o, nullptr, dq, dk, dv, n.B, n.H, n.T, n.D, 0.25f);
    ops::split_heads_backward(c, dq, dk, dv, dqkv, n.B, n.H, n.T, n.D);
    std::vector<float> result(4 * e);  // the output y, then dqkv
    c.download(result.data(), y, e * sizeof(float));
    c.download(result.data() + e, dqkv, 3 * e * sizeof(float));
    return result;
  };
  const std::vector<float> on_host = run(host, qkv, dy), on_device = run(*ctx, qkv, dy);
  EXPECT_TRUE(all_close(on_device, widen(on_host), 1e-5, 2e-5));
}

// ops::batched_gemm_mixed on a device: a and b are rounded into the context's workspace (their whole strided spans,
// padding included) and multiplied in 16 bits; the fp32 CPU product of the same rounded values is the reference.
TEST_F(CudaAttentionTest, MixedBatchedGemmThroughOpsRoundsTheOperandSpans) {
  const std::size_t m = 17, n = 24, k = 40, batch = 3, lda = k + 3, ldb = n + 1, ldc = n;
  const std::size_t sa = m * lda + 2, sb = k * ldb, sc = m * ldc;
  auto ctx = ExecutionContext::cuda(0);
  for (DType type : {DType::BF16, DType::F16}) {
    std::vector<float> a = random_floats(batch * sa, -1.0f, 1.0f, 20), b = random_floats(batch * sb, -1.0f, 1.0f, 21);
    std::vector<float> c(batch * sc, 0.0f);
    Tensor t = ctx->zeros({static_cast<std::int64_t>(a.size() + b.size() + c.size())}, DType::F32);
    float* g_a = static_cast<float*>(t.data());
    float *g_b = g_a + a.size(), *g_c = g_b + b.size();
    ctx->upload(g_a, a.data(), a.size() * sizeof(float));
    ctx->upload(g_b, b.data(), b.size() * sizeof(float));
    ops::batched_gemm_mixed(*ctx, type, Trans::No, Trans::No, m, n, k, 1.0f, g_a, lda, sa, g_b, ldb, sb, 0.0f, g_c, ldc,
                            sc, batch);
    for (std::vector<float>* x : {&a, &b}) {
      std::vector<std::uint16_t> rounded(x->size());
      cast_from_f32(x->data(), rounded.data(), type, x->size());
      cast_to_f32(rounded.data(), type, x->data(), x->size());
    }
    cpu::batched_gemm(Trans::No, Trans::No, m, n, k, 1.0f, a.data(), lda, sa, b.data(), ldb, sb, 0.0f, c.data(), ldc,
                      sc, batch);
    std::vector<float> got(c.size());
    ctx->download(got.data(), g_c, got.size() * sizeof(float));
    EXPECT_TRUE(all_close(got, widen(c), 1e-5, 2e-5)) << dtype_name(type);
  }
}

// Host-side checks of the CUDA entry points: they throw before touching the device, so they run everywhere.
TEST(CudaAttentionChecks, RefuseBadArgumentsBeforeAnyDeviceCall) {
  EXPECT_THROW(cuda::attention_forward_workspace_bytes(1, 1, 4, 4, DType::I32, false), UsageError);
  float dummy = 0.0f;
  float* p = &dummy;
  try {
    cuda::attention_forward(p, p, p, p, nullptr, 1, 1, 4, 4, 0.5f, DType::F32, p, 1, nullptr, nullptr);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("workspace_bytes = 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cuda::causal_softmax_forward(p, 1, 4, NAN, nullptr), UsageError);
  EXPECT_THROW(cuda::split_heads(p, p, p, p, std::size_t{1} << 40, std::size_t{1} << 40, 2, 2, nullptr), UsageError);
  EXPECT_THROW(cuda::batched_gemm_lowp(DType::F32, Trans::No, Trans::No, 1, 1, 1, 1.0f, p, 1, 1, p, 1, 1, 0.0f, p, 1, 1,
                                       1, nullptr, nullptr),
               UsageError);
  EXPECT_THROW(
      cuda::batched_gemm(Trans::No, Trans::No, 4, 4, 4, 1.0f, p, 4, 16, p, 4, 16, 0.0f, p, 4, 8, 2, nullptr, nullptr),
      UsageError);
}

}  // namespace
}  // namespace tenax::kernels
