// CPU reference kernels: bandwidth beside a single-thread memcpy moving the same bytes (the kernels are single
// threaded too), plus the OpenBLAS sgemm rate.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_table.hpp"
#include "cpu_gpu_entry.hpp"
#include "tenax/kernels/activation.hpp"
#include "tenax/kernels/attention.hpp"
#include "tenax/kernels/blas_core.hpp"
#include "tenax/kernels/cast.hpp"
#include "tenax/kernels/elementwise.hpp"
#include "tenax/kernels/embedding.hpp"
#include "tenax/kernels/gemm.hpp"
#include "tenax/kernels/layernorm.hpp"
#include "tenax/kernels/loss.hpp"
#include "tenax/kernels/optimizer.hpp"
#include "tenax/kernels/reduction.hpp"
#include "tenax/kernels/unscale.hpp"
#include "tenax/kernels/vocab_parallel_loss.hpp"

namespace tenax::bench {
namespace {

using namespace tenax::kernels;

// Arrays filled with finite, non-trivial values: every page is touched before timing (a fresh page costs ~10 us on
// these VMs and would dominate), and no kernel meets NaN or subnormal slow paths.
std::vector<float> filled(std::size_t n, float base) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = base + 1e-3f * static_cast<float>(i % 1000);
  return v;
}

class CpuBench {
 public:
  explicit CpuBench(const Options& o)
      : o_(o),
        n_(o.elements),
        copy_src_(filled(n_ * 8, 1.0f)),  // the largest kernel moves 30 bytes per element: 15 each way
        copy_dst_(filled(n_ * 8, 2.0f)) {}

  // Times `kernel` and a memcpy whose read + write traffic equals the kernel's `bytes`.
  template <class F>
  void add(const std::string& name, const std::string& shape, double bytes, F&& kernel) {
    Row r{name, shape, bytes, median_seconds(o_.reps, kernel), 0};
    const std::size_t copy_bytes = static_cast<std::size_t>(bytes / 2);
    r.ref_seconds = median_seconds(o_.reps, [&] { std::memcpy(copy_dst_.data(), copy_src_.data(), copy_bytes); });
    rows_.push_back(r);
    std::fprintf(stderr, "  measured %s\n", name.c_str());
  }

  void run() {
    const double n = static_cast<double>(n_);
    const std::string flat = std::to_string(n_ >> 20) + "Mi";
    std::vector<float> a = filled(n_, 0.5f), b = filled(n_, -0.25f), c = filled(n_, 0.01f), d = filled(n_, 0.02f);
    std::vector<std::uint16_t> h(n_, 0x3F80);

    add("cast f32->bf16", flat, 6 * n, [&] { cast_from_f32(a.data(), h.data(), DType::BF16, n_); });
    add("cast f32->f16", flat, 6 * n, [&] { cast_from_f32(a.data(), h.data(), DType::F16, n_); });
    add("cast bf16->f32", flat, 6 * n, [&] { cast_to_f32(h.data(), DType::BF16, b.data(), n_); });
    float flag = 0.0f;
    // Halving and doubling in turn keeps the values (and away from subnormals); a factor of one only reads.
    float factor = 0.5f;
    add("unscale_and_check", flat, 8 * n, [&] {
      cpu::unscale_and_check(a.data(), n_, factor, &flag);
      factor = 1.0f / factor;
    });
    add("finite check (factor 1)", flat, 4 * n, [&] { cpu::unscale_and_check(a.data(), n_, 1.0f, &flag); });
    add("sum_squares", flat, 4 * n, [&] {
      volatile double s = cpu::sum_squares(a.data(), n_);
      (void)s;
    });
    // AdamW: reads w, m, v, g; writes w, m, v and the bf16 copy.
    AdamWParams ap{};
    add("adamw_step +bf16 copy", flat, 30 * n, [&] {
      ++ap.step;
      cpu::adamw_step(a.data(), c.data(), d.data(), b.data(), h.data(), DType::BF16, n_, ap);
    });
    const std::vector<float> g = filled(n_, 0.001f);
    add("sgd_momentum +bf16 copy", flat, 22 * n, [&] {
      cpu::sgd_momentum_step(b.data(), c.data(), g.data(), h.data(), DType::BF16, n_, SgdParams{.lr = 1e-6f});
    });

    const std::size_t cols = 3072, rows = n_ / cols;
    const std::string rc = std::to_string(rows) + "x" + std::to_string(cols);
    const double e = static_cast<double>(rows * cols);
    const std::vector<float> bias = filled(cols, 0.1f);
    std::vector<float> dbias(cols, 0.0f);
    add("bias_gelu_forward", rc, 8 * e, [&] { cpu::bias_gelu_forward(a.data(), bias.data(), b.data(), rows, cols); });
    add("bias_gelu_backward", rc, 12 * e,
        [&] { cpu::bias_gelu_backward(a.data(), bias.data(), g.data(), c.data(), dbias.data(), rows, cols); });
    add("add_inplace (residual)", flat, 12 * n, [&] { cpu::add_inplace(b.data(), g.data(), n_); });
    add("bias_add", rc, 8 * e, [&] { cpu::bias_add(b.data(), bias.data(), rows, cols); });
    add("bias_grad", rc, 4 * e, [&] { cpu::bias_grad(g.data(), dbias.data(), rows, cols); });

    // Embedding: rows of 1024 features gathered from (and their gradients added into) a 8192-token table.
    const std::size_t features = 1024, emb_vocab = 8192, emb_rows = n_ / features;
    const double emb_e = static_cast<double>(emb_rows * features);
    std::vector<std::int32_t> tokens(emb_rows);
    for (std::size_t r = 0; r < emb_rows; ++r)
      tokens[r] = static_cast<std::int32_t>((r * 104729) % emb_vocab);
    const std::vector<float> table = filled(emb_vocab * features, 0.1f);
    std::vector<float> table_grad(emb_vocab * features, 0.0f);
    const std::string embshape = std::to_string(emb_rows) + "x" + std::to_string(features);
    add("embedding_forward", embshape, 8 * emb_e,
        [&] { cpu::embedding_forward(tokens.data(), table.data(), b.data(), emb_rows, features, emb_vocab); });
    add("embedding_backward", embshape, 12 * emb_e,
        [&] { cpu::embedding_backward(tokens.data(), g.data(), table_grad.data(), emb_rows, features); });

    const std::size_t vocab = 32768, ce_rows = n_ / vocab;
    std::vector<std::int32_t> targets(ce_rows);
    for (std::size_t r = 0; r < ce_rows; ++r)
      targets[r] = static_cast<std::int32_t>((r * 7919) % vocab);
    add("softmax_cross_entropy", std::to_string(ce_rows) + "x" + std::to_string(vocab), 8.0 * ce_rows * vocab,
        [&] { cpu::softmax_cross_entropy(a.data(), targets.data(), b.data(), ce_rows, vocab, 1.0f); });
    // The vocabulary-parallel phases on one rank's logits (here the whole vocabulary).
    std::vector<float> row_max(ce_rows);
    std::vector<double> row_sums(2 * ce_rows);
    const std::string ceshape = std::to_string(ce_rows) + "x" + std::to_string(vocab);
    const double ce_e = static_cast<double>(ce_rows * vocab);
    add("ce_row_max (tp vocab)", ceshape, 4 * ce_e, [&] { cpu::ce_row_max(a.data(), ce_rows, vocab, row_max.data()); });
    add("ce_row_sums (tp vocab)", ceshape, 4 * ce_e,
        [&] { cpu::ce_row_sums(a.data(), targets.data(), ce_rows, vocab, 0, row_max.data(), row_sums.data()); });
    add("ce_finish (tp vocab)", ceshape, 8 * ce_e, [&] {
      volatile double loss =
          cpu::ce_finish(a.data(), targets.data(), b.data(), ce_rows, vocab, 0, row_max.data(), row_sums.data(), 1.0f);
      (void)loss;
    });

    const std::size_t hidden = 1024, ln_rows = n_ / hidden;
    const std::string lnshape = std::to_string(ln_rows) + "x" + std::to_string(hidden);
    const double ln_e = static_cast<double>(ln_rows * hidden);
    const std::vector<float> gamma = filled(hidden, 1.0f), beta = filled(hidden, 0.0f);
    std::vector<float> mean(ln_rows), rstd(ln_rows), dgamma(hidden, 0.0f), dbeta(hidden, 0.0f);
    add("layernorm_forward", lnshape, 8 * ln_e, [&] {
      cpu::layernorm_forward(a.data(), gamma.data(), beta.data(), b.data(), mean.data(), rstd.data(), ln_rows, hidden,
                             1e-5f);
    });
    add("layernorm_backward", lnshape, 12 * ln_e, [&] {
      cpu::layernorm_backward(a.data(), gamma.data(), mean.data(), rstd.data(), g.data(), c.data(), dgamma.data(),
                              dbeta.data(), ln_rows, hidden);
    });
    // Attention's memory-bound kernels at a GPT-2-small head shape (12 heads of 64 on this rank, T = 1024).
    const std::size_t heads = 12, head_dim = 64, seq = 1024;
    const std::size_t seqs = n_ / (3 * heads * head_dim * seq);  // sequences whose packed QKV fits one array
    if (seqs > 0) {
      const std::string hshape = std::to_string(seqs) + "x" + std::to_string(heads) + "x" + std::to_string(seq) + "x" +
                                 std::to_string(head_dim);
      const double he = static_cast<double>(seqs * heads * seq * head_dim);
      add("split_heads (qkv)", hshape, 24 * he,
          [&] { cpu::split_heads(a.data(), b.data(), c.data(), d.data(), seqs, heads, seq, head_dim); });
      add("split_heads_backward", hshape, 24 * he,
          [&] { cpu::split_heads_backward(b.data(), c.data(), d.data(), a.data(), seqs, heads, seq, head_dim); });
      add("merge_heads", hshape, 8 * he, [&] { cpu::merge_heads(b.data(), c.data(), seqs, heads, seq, head_dim); });
      add("merge_heads_backward", hshape, 8 * he,
          [&] { cpu::merge_heads_backward(c.data(), b.data(), seqs, heads, seq, head_dim); });
    }
    const std::size_t sm_blocks = n_ / (seq * seq);
    if (sm_blocks > 0) {
      // Minimum traffic: the lower triangle read (twice that for the backward's two inputs), every entry written.
      const double tri = static_cast<double>(sm_blocks * seq * (seq + 1) / 2),
                   full = static_cast<double>(sm_blocks * seq * seq);
      const std::string sshape = std::to_string(sm_blocks) + "x" + std::to_string(seq) + "x" + std::to_string(seq);
      // In place, call after call: probabilities are valid scores too (finite, no subnormal exponentials).
      add("causal_softmax_forward", sshape, 4 * (tri + full),
          [&] { cpu::causal_softmax_forward(a.data(), sm_blocks, seq, 0.125f); });
      add("causal_softmax_backward", sshape, 4 * (2 * tri + full),
          [&] { cpu::causal_softmax_backward(a.data(), g.data(), c.data(), sm_blocks, seq, 0.125f); });
    }
    print_table("CPU reference kernels (single thread) vs single-thread memcpy of the same bytes", "memcpy", rows_,
                0.0);
  }

 private:
  Options o_;
  std::size_t n_;
  std::vector<float> copy_src_, copy_dst_;
  std::vector<Row> rows_;
};

void cpu_matmul_rate(const Options& o) {
  std::printf("\nCPU fp32 matmul (cpu::gemm -> cblas_sgemm: %s; %d OpenBLAS thread(s))\n",
              cpu::describe(cpu::blas_core_choice()).c_str(), openblas_get_num_threads());
  std::printf("%-18s %10s %10s\n", "m=n=k", "time ms", "GFLOP/s");
  for (std::size_t s : {std::size_t{256}, std::size_t{1024}, std::size_t{2048}}) {
    const std::vector<float> a = filled(s * s, 0.1f), b = filled(s * s, 0.2f);
    std::vector<float> c(s * s, 0.0f);
    const double t = median_seconds(
        o.reps, [&] { cpu::gemm(Trans::No, Trans::No, s, s, s, 1.0f, a.data(), s, b.data(), s, 0.0f, c.data(), s); });
    std::printf("%-18zu %10.3f %10.1f\n", s, t * 1e3, 2.0 * s * s * s / t / 1e9);
  }
}

// The causal attention core (kernels::cpu::attention_forward/backward) on one thread of OpenBLAS calls, keeping P for
// the backward and recomputing it. GFLOP/s counts the causal products only (what a kernel that skips the masked half
// must do): forward 2 T(T+1) D per head, backward 4 T(T+1) D, recomputation another T(T+1) D.
void cpu_attention_core(const Options& o) {
  std::printf("\nCPU causal attention core (%d OpenBLAS thread(s); median of %d)\n", openblas_get_num_threads(),
              std::max(o.reps, 31));
  std::printf("%-20s %-10s %10s %10s %12s %12s\n", "B x H x T x D", "P", "fwd ms", "bwd ms", "fwd+bwd ms", "GFLOP/s");
  struct Shape {
    std::size_t B, H, T, D;
  };
  for (const Shape& s : {Shape{4, 4, 128, 32}, Shape{1, 12, 1024, 64}}) {
    const std::size_t e = s.B * s.H * s.T * s.D;
    const std::vector<float> q = filled(e, 0.1f), k = filled(e, -0.2f), v = filled(e, 0.3f), dout = filled(e, 0.01f);
    std::vector<float> out(e), dq(e), dk(e), dv(e), probs(s.B * s.H * s.T * s.T);
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.D));
    const double flop = static_cast<double>(s.B * s.H) * static_cast<double>(s.T * (s.T + 1) * s.D);
    for (bool saved : {true, false}) {
      float* p = saved ? probs.data() : nullptr;
      const int reps = std::max(o.reps, 31);
      const double f = median_seconds(reps, [&] {
        cpu::attention_forward(q.data(), k.data(), v.data(), out.data(), p, s.B, s.H, s.T, s.D, scale);
      });
      const double b = median_seconds(reps, [&] {
        cpu::attention_backward(q.data(), k.data(), v.data(), dout.data(), p, dq.data(), dk.data(), dv.data(), s.B, s.H,
                                s.T, s.D, scale);
      });
      const std::string shape =
          std::to_string(s.B) + "x" + std::to_string(s.H) + "x" + std::to_string(s.T) + "x" + std::to_string(s.D);
      std::printf("%-20s %-10s %10.3f %10.3f %12.3f %12.1f\n", shape.c_str(), saved ? "saved" : "recomputed", f * 1e3,
                  b * 1e3, (f + b) * 1e3, flop * (saved ? 6 : 7) / (f + b) / 1e9);
    }
  }
}

}  // namespace

void run_cpu_benchmarks(const Options& o) {
  CpuBench(o).run();
  cpu_matmul_rate(o);
  cpu_attention_core(o);
}

}  // namespace tenax::bench
