// The CPU attention core (kernels::cpu::attention_forward/backward) against a float64 reference of the composite, a
// finite-difference check of its backward, the recompute option, masking exactness, and the host dispatch in ops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "attention_reference.hpp"
#include "kernel_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/execution.hpp"
#include "tenax/kernels/attention.hpp"
#include "tenax/kernels/batched_gemm.hpp"
#include "tenax/ops.hpp"

namespace tenax::kernels {
namespace {

using test::all_close;
using test::AttentionSize;
using test::random_floats;
using test::widen;

struct Inputs {
  std::vector<float> q, k, v, d_out;
};

Inputs make_inputs(const AttentionSize& n, unsigned seed) {
  // q and k of size ~1 with scale 1/sqrt(D) give scores of order 1: probabilities neither uniform nor one-hot.
  return {random_floats(n.head_elems(), -1.0f, 1.0f, seed), random_floats(n.head_elems(), -1.0f, 1.0f, seed + 1),
          random_floats(n.head_elems(), -1.0f, 1.0f, seed + 2), random_floats(n.head_elems(), -1.0f, 1.0f, seed + 3)};
}

struct Outputs {
  std::vector<float> out, probs, dq, dk, dv;
};

Outputs run_cpu(const Inputs& in, const AttentionSize& n, float scale, bool save_probs) {
  Outputs o{std::vector<float>(n.head_elems()), std::vector<float>(save_probs ? n.score_elems() : 0),
            std::vector<float>(n.head_elems()), std::vector<float>(n.head_elems()), std::vector<float>(n.head_elems())};
  float* probs = save_probs ? o.probs.data() : nullptr;
  cpu::attention_forward(in.q.data(), in.k.data(), in.v.data(), o.out.data(), probs, n.B, n.H, n.T, n.D, scale);
  cpu::attention_backward(in.q.data(), in.k.data(), in.v.data(), in.d_out.data(), probs, o.dq.data(), o.dk.data(),
                          o.dv.data(), n.B, n.H, n.T, n.D, scale);
  return o;
}

// Sizes around the 32-row query blocks: one partial block, exact blocks, and a partial last block.
const AttentionSize kSizes[] = {{1, 1, 1, 3}, {2, 3, 17, 8}, {1, 2, 64, 16}, {2, 2, 77, 12}};

TEST(AttentionCore, ForwardAndBackwardMatchFloat64) {
  for (const AttentionSize& n : kSizes) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(n.D));
    const Inputs in = make_inputs(n, 10);
    const Outputs o = run_cpu(in, n, scale, true);
    const test::RefForward f = test::ref_attention_forward(widen(in.q), widen(in.k), widen(in.v), n, scale);
    const test::RefGrads g =
        test::ref_attention_backward(widen(in.q), widen(in.k), widen(in.v), widen(in.d_out), n, scale);
    // Largest differences measured at these sizes (and at 4 x 4 x 128 x 32): out 1.1e-7, probs 6.3e-8, dq 7.5e-8,
    // dk 1.7e-7, dv 4.9e-7. Tolerances 5-10x that.
    EXPECT_TRUE(all_close(o.out, f.out, 0.0, 1e-6)) << "T " << n.T;
    EXPECT_TRUE(all_close(o.probs, f.p, 0.0, 4e-7)) << "T " << n.T;
    EXPECT_TRUE(all_close(o.dq, g.dq, 0.0, 1e-6)) << "T " << n.T;
    EXPECT_TRUE(all_close(o.dk, g.dk, 0.0, 1e-6)) << "T " << n.T;
    EXPECT_TRUE(all_close(o.dv, g.dv, 0.0, 3e-6)) << "T " << n.T;
  }
}

// The float64 reference forward, differentiated numerically: L = sum(out * d_out). Central differences in double with
// h = 1e-4 are exact to ~1e-8 here, below the fp32 kernel's rounding, so this checks the backward's formulas
// independently of any hand-derived gradient (the reference backward included). Measured: 1.3e-7.
TEST(AttentionCore, BackwardMatchesFiniteDifferencesOfTheFloat64Forward) {
  const AttentionSize n{1, 2, 37, 5};
  const float scale = 0.4f;
  const Inputs in = make_inputs(n, 20);
  const Outputs o = run_cpu(in, n, scale, false);
  std::vector<double> x[3] = {widen(in.q), widen(in.k), widen(in.v)};
  const std::vector<float>* grads[3] = {&o.dq, &o.dk, &o.dv};
  const std::vector<double> w = widen(in.d_out);
  auto loss = [&] {
    const std::vector<double> out = test::ref_attention_forward(x[0], x[1], x[2], n, scale).out;
    double l = 0.0;
    for (std::size_t i = 0; i < out.size(); ++i)
      l += out[i] * w[i];
    return l;
  };
  const double h = 1e-4;
  double worst = 0.0;
  for (int t = 0; t < 3; ++t)
    for (std::size_t i = 0; i < x[t].size(); i += 7) {  // every 7th element: all heads, positions and columns
      const double keep = x[t][i];
      x[t][i] = keep + h;
      const double up = loss();
      x[t][i] = keep - h;
      const double down = loss();
      x[t][i] = keep;
      const double numeric = (up - down) / (2 * h);
      const double diff = std::fabs(numeric - (*grads[t])[i]);
      worst = std::max(worst, diff);
      ASSERT_LE(diff, 1e-6) << "tensor "
                            << "qkv"[t] << " element " << i << ": numeric " << numeric << " vs " << (*grads[t])[i];
    }
  std::printf("largest |finite difference - backward| = %.3g\n", worst);
}

TEST(AttentionCore, RecomputingTheProbabilitiesGivesTheSameBits) {
  const AttentionSize n{2, 2, 77, 12};
  const Inputs in = make_inputs(n, 30);
  const Outputs saved = run_cpu(in, n, 0.3f, true);
  const Outputs recomputed = run_cpu(in, n, 0.3f, false);
  EXPECT_EQ(saved.out, recomputed.out);
  EXPECT_EQ(saved.dq, recomputed.dq);
  EXPECT_EQ(saved.dk, recomputed.dk);
  EXPECT_EQ(saved.dv, recomputed.dv);
}

// No leakage from the future: changing k and v at every position after t0 (to large values, so that any use of them
// would show) leaves the outputs and query gradients of positions <= t0 bit for bit the same.
TEST(AttentionCore, FuturePositionsDoNotReachEarlierOutputs) {
  const AttentionSize n{2, 2, 70, 8};
  const Inputs in = make_inputs(n, 40);
  const Outputs base = run_cpu(in, n, 0.35f, true);
  for (std::size_t t0 : {0, 31, 40, 68}) {
    Inputs changed = in;
    const std::vector<float> noise = random_floats(n.head_elems(), -1e4f, 1e4f, 41);
    for (std::size_t bh = 0; bh < n.heads(); ++bh)
      for (std::size_t t = t0 + 1; t < n.T; ++t)
        for (std::size_t d = 0; d < n.D; ++d) {
          const std::size_t i = (bh * n.T + t) * n.D + d;
          changed.k[i] = noise[i];
          changed.v[i] = -noise[i];
        }
    const Outputs o = run_cpu(changed, n, 0.35f, true);
    for (std::size_t bh = 0; bh < n.heads(); ++bh)
      for (std::size_t t = 0; t <= t0; ++t)
        for (std::size_t d = 0; d < n.D; ++d) {
          const std::size_t i = (bh * n.T + t) * n.D + d;
          ASSERT_EQ(o.out[i], base.out[i]) << "t0 " << t0 << " head " << bh << " position " << t;
          ASSERT_EQ(o.dq[i], base.dq[i]) << "t0 " << t0 << " head " << bh << " position " << t;
        }
  }
}

TEST(AttentionCore, RefusesANonFiniteScaleMissingTensorsAndOverflow) {
  const AttentionSize n{1, 1, 4, 4};
  std::vector<float> x(n.head_elems());
  EXPECT_THROW(cpu::attention_forward(x.data(), x.data(), x.data(), x.data(), nullptr, 1, 1, 4, 4, NAN), UsageError);
  EXPECT_THROW(cpu::attention_forward(x.data(), nullptr, x.data(), x.data(), nullptr, 1, 1, 4, 4, 1.0f), UsageError);
  EXPECT_THROW(cpu::attention_backward(x.data(), x.data(), x.data(), x.data(), nullptr, x.data(), nullptr, x.data(), 1,
                                       1, 4, 4, 1.0f),
               UsageError);
  EXPECT_THROW(cpu::attention_forward(x.data(), x.data(), x.data(), x.data(), nullptr, 1, std::size_t{1} << 30,
                                      std::size_t{1} << 20, 4, 1.0f),
               UsageError);
  EXPECT_NO_THROW(cpu::attention_forward(nullptr, nullptr, nullptr, nullptr, nullptr, 0, 4, 4, 4, 1.0f));
}

// The host dispatch is exactly the CPU kernel (ops.hpp's contract), for the pieces and the whole core.
TEST(AttentionOps, HostDispatchIsTheCpuKernelBitForBit) {
  const AttentionSize n{2, 3, 33, 8};
  ExecutionContext& host = ExecutionContext::host();
  const Inputs in = make_inputs(n, 50);
  const Outputs expected = run_cpu(in, n, 0.3f, true);
  Outputs got{std::vector<float>(n.head_elems()), std::vector<float>(n.score_elems()),
              std::vector<float>(n.head_elems()), std::vector<float>(n.head_elems()),
              std::vector<float>(n.head_elems())};
  ops::attention_forward(host, in.q.data(), in.k.data(), in.v.data(), got.out.data(), got.probs.data(), n.B, n.H, n.T,
                         n.D, 0.3f, DType::BF16);
  ops::attention_backward(host, in.q.data(), in.k.data(), in.v.data(), in.d_out.data(), got.probs.data(), got.dq.data(),
                          got.dk.data(), got.dv.data(), n.B, n.H, n.T, n.D, 0.3f, DType::BF16);
  EXPECT_EQ(got.out, expected.out);
  EXPECT_EQ(got.probs, expected.probs);
  EXPECT_EQ(got.dq, expected.dq);
  EXPECT_EQ(got.dk, expected.dk);
  EXPECT_EQ(got.dv, expected.dv);

  const std::vector<float> qkv = random_floats(n.B * n.T * 3 * n.H * n.D, -1.0f, 1.0f, 51);
  std::vector<float> q(n.head_elems()), k(q.size()), v(q.size()), q2(q.size()), k2(q.size()), v2(q.size());
  cpu::split_heads(qkv.data(), q.data(), k.data(), v.data(), n.B, n.H, n.T, n.D);
  ops::split_heads(host, qkv.data(), q2.data(), k2.data(), v2.data(), n.B, n.H, n.T, n.D);
  EXPECT_EQ(q2, q);
  EXPECT_EQ(v2, v);
  // The mixed product is the fp32 one on the host, whatever the precision policy.
  std::vector<float> c(n.score_elems()), c2(n.score_elems());
  cpu::batched_gemm(Trans::No, Trans::Yes, n.T, n.T, n.D, 1.0f, q.data(), n.D, n.T * n.D, k.data(), n.D, n.T * n.D,
                    0.0f, c.data(), n.T, n.T * n.T, n.heads());
  ops::batched_gemm_mixed(host, DType::BF16, Trans::No, Trans::Yes, n.T, n.T, n.D, 1.0f, q.data(), n.D, n.T * n.D,
                          k.data(), n.D, n.T * n.D, 0.0f, c2.data(), n.T, n.T * n.T, n.heads());
  EXPECT_EQ(c2, c);
  std::vector<float> s = random_floats(n.score_elems(), -3.0f, 3.0f, 52), s2 = s;
  cpu::causal_softmax_forward(s.data(), n.heads(), n.T, 0.5f);
  ops::causal_softmax_forward(host, s2.data(), n.heads(), n.T, 0.5f);
  EXPECT_EQ(s2, s);
}

}  // namespace
}  // namespace tenax::kernels
