// CUDA kernels: achieved bandwidth beside a device-to-device cudaMemcpy moving the same bytes (target >= 80%), and the
// fp32 / bf16 matmul rates of cuBLAS at a size that fills the GPU.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_table.hpp"
#include "cpu_gpu_entry.hpp"
#include "cuda/check.hpp"
#include "tenax/kernels/activation.hpp"
#include "tenax/kernels/attention.hpp"
#include "tenax/kernels/cast.hpp"
#include "tenax/kernels/elementwise.hpp"
#include "tenax/kernels/embedding.hpp"
#include "tenax/kernels/fused_attention.hpp"
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

constexpr double kTarget = 0.80;

// A device allocation filled with finite values (cast from a host pattern), freed on scope exit.
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t bytes) : bytes_(bytes) {
    TENAX_CUDA_CHECK(cudaMalloc(&p_, bytes));
    TENAX_CUDA_CHECK(cudaMemset(p_, 0, bytes));
  }
  DeviceArray(std::size_t n_floats, float base) : DeviceArray(n_floats * sizeof(float)) {
    std::vector<float> host(n_floats);
    for (std::size_t i = 0; i < n_floats; ++i)
      host[i] = base + 1e-3f * static_cast<float>(i % 1000);
    TENAX_CUDA_CHECK(cudaMemcpy(p_, host.data(), bytes_, cudaMemcpyHostToDevice));
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(p_); }
  float* f() { return static_cast<float*>(p_); }
  template <class T>
  T* as() {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
  std::size_t bytes_;
};

// Median device time of one call (CUDA events around each call, after a warm-up call).
template <class F>
double median_device_seconds(int reps, F&& f) {
  cudaEvent_t start, stop;
  TENAX_CUDA_CHECK(cudaEventCreate(&start));
  TENAX_CUDA_CHECK(cudaEventCreate(&stop));
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    TENAX_CUDA_CHECK(cudaEventRecord(start));
    f();
    TENAX_CUDA_CHECK(cudaEventRecord(stop));
    TENAX_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    TENAX_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    t.push_back(ms * 1e-3);
  }
  TENAX_CUDA_CHECK(cudaEventDestroy(start));
  TENAX_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

class GpuBench {
 public:
  explicit GpuBench(const Options& o)
      : o_(o), n_(o.elements * 4), copy_src_(n_ * 8 * sizeof(float) / 2), copy_dst_(n_ * 8 * sizeof(float) / 2) {}

  template <class F>
  void add(const std::string& name, const std::string& shape, double bytes, F&& kernel) {
    Row r{name, shape, bytes, median_device_seconds(o_.reps, kernel), 0};
    const std::size_t copy_bytes = static_cast<std::size_t>(bytes / 2);  // a copy reads and writes each byte
    r.ref_seconds = median_device_seconds(o_.reps, [&] {
      TENAX_CUDA_CHECK(cudaMemcpyAsync(copy_dst_.f(), copy_src_.f(), copy_bytes, cudaMemcpyDeviceToDevice));
    });
    rows_.push_back(r);
  }

  int run() {
    const double n = static_cast<double>(n_);
    const std::string flat = std::to_string(n_ >> 20) + "Mi";
    DeviceArray a(n_, 0.5f), b(n_, -0.25f), c(n_, 0.01f), d(n_, 0.02f), g(n_, 0.001f);
    DeviceArray h(n_ * sizeof(std::uint16_t)), flag(sizeof(float)), sum(sizeof(double));

    add("cast f32->bf16", flat, 6 * n, [&] { cuda::cast_from_f32(a.f(), h.f(), DType::BF16, n_, nullptr); });
    add("cast f32->f16", flat, 6 * n, [&] { cuda::cast_from_f32(a.f(), h.f(), DType::F16, n_, nullptr); });
    add("cast bf16->f32", flat, 6 * n, [&] { cuda::cast_to_f32(h.f(), DType::BF16, b.f(), n_, nullptr); });
    float factor = 0.5f;  // halving and doubling in turn keeps the values; a factor of one only reads
    add("unscale_and_check", flat, 8 * n, [&] {
      cuda::unscale_and_check(a.f(), n_, factor, flag.f(), nullptr);
      factor = 1.0f / factor;
    });
    add("finite check (factor 1)", flat, 4 * n, [&] { cuda::unscale_and_check(a.f(), n_, 1.0f, flag.f(), nullptr); });
    add("sum_squares", flat, 4 * n, [&] { cuda::sum_squares(a.f(), n_, sum.as<double>(), nullptr); });
    AdamWParams ap{};
    add("adamw_step +bf16 copy", flat, 30 * n, [&] {
      ++ap.step;
      cuda::adamw_step(a.f(), c.f(), d.f(), b.f(), h.f(), DType::BF16, n_, ap, nullptr);
    });
    add("sgd_momentum +bf16 copy", flat, 22 * n,
        [&] { cuda::sgd_momentum_step(b.f(), c.f(), g.f(), h.f(), DType::BF16, n_, SgdParams{.lr = 1e-6f}, nullptr); });

    const std::size_t cols = 3072, rows = n_ / cols;
    const double e = static_cast<double>(rows * cols);
    const std::string rc = std::to_string(rows) + "x" + std::to_string(cols);
    DeviceArray bias(cols, 0.1f), dbias(cols, 0.0f);
    add("bias_gelu_forward", rc, 8 * e, [&] { cuda::bias_gelu_forward(a.f(), bias.f(), b.f(), rows, cols, nullptr); });
    add("bias_gelu_backward", rc, 12 * e,
        [&] { cuda::bias_gelu_backward(a.f(), bias.f(), g.f(), c.f(), dbias.f(), rows, cols, nullptr); });
    add("add_inplace (residual)", flat, 12 * n, [&] { cuda::add_inplace(b.f(), g.f(), n_, nullptr); });
    add("bias_add", rc, 8 * e, [&] { cuda::bias_add(b.f(), bias.f(), rows, cols, nullptr); });
    add("bias_grad", rc, 4 * e, [&] { cuda::bias_grad(g.f(), dbias.f(), rows, cols, nullptr); });

    // Embedding: rows of 1024 features gathered from (and their gradients added into) a 8192-token table.
    const std::size_t features = 1024, emb_vocab = 8192, emb_rows = n_ / features;
    const double emb_e = static_cast<double>(emb_rows * features);
    std::vector<std::int32_t> host_tokens(emb_rows);
    for (std::size_t r = 0; r < emb_rows; ++r)
      host_tokens[r] = static_cast<std::int32_t>((r * 104729) % emb_vocab);
    DeviceArray tokens(emb_rows * sizeof(std::int32_t)), table(emb_vocab * features, 0.1f);
    DeviceArray table_grad(emb_vocab * features, 0.0f);
    TENAX_CUDA_CHECK(cudaMemcpy(tokens.f(), host_tokens.data(), emb_rows * 4, cudaMemcpyHostToDevice));
    const std::string embshape = std::to_string(emb_rows) + "x" + std::to_string(features);
    add("embedding_forward", embshape, 8 * emb_e, [&] {
      cuda::embedding_forward(tokens.as<std::int32_t>(), table.f(), b.f(), emb_rows, features, emb_vocab, nullptr);
    });
    // Each gradient element is read once and added (read + write) into the table.
    add("embedding_backward", embshape, 12 * emb_e, [&] {
      cuda::embedding_backward(tokens.as<std::int32_t>(), g.f(), table_grad.f(), emb_rows, features, emb_vocab,
                               nullptr);
    });

    const std::size_t vocab = 32768, ce_rows = n_ / vocab;
    std::vector<std::int32_t> host_targets(ce_rows);
    for (std::size_t r = 0; r < ce_rows; ++r)
      host_targets[r] = static_cast<std::int32_t>((r * 7919) % vocab);
    DeviceArray targets(ce_rows * sizeof(std::int32_t));
    TENAX_CUDA_CHECK(cudaMemcpy(targets.f(), host_targets.data(), ce_rows * 4, cudaMemcpyHostToDevice));
    add("softmax_cross_entropy", std::to_string(ce_rows) + "x" + std::to_string(vocab), 8.0 * ce_rows * vocab, [&] {
      cuda::softmax_cross_entropy(a.f(), targets.as<std::int32_t>(), b.f(), ce_rows, vocab, 1.0f, sum.as<double>(),
                                  nullptr);
    });

    // The vocabulary-parallel phases of one tensor-parallel rank's logits (here its whole vocabulary): the maximum and
    // the exponential sums read the logits once each, the finish reads them and writes the gradient.
    DeviceArray row_max(ce_rows, 0.0f), row_sums(2 * ce_rows * sizeof(double));
    const std::string ceshape = std::to_string(ce_rows) + "x" + std::to_string(vocab);
    const double ce_e = static_cast<double>(ce_rows * vocab);
    add("ce_row_max (tp vocab)", ceshape, 4 * ce_e,
        [&] { cuda::ce_row_max(a.f(), ce_rows, vocab, row_max.f(), nullptr); });
    add("ce_row_sums (tp vocab)", ceshape, 4 * ce_e, [&] {
      cuda::ce_row_sums(a.f(), targets.as<std::int32_t>(), ce_rows, vocab, 0, row_max.f(), row_sums.as<double>(),
                        nullptr);
    });
    add("ce_finish (tp vocab)", ceshape, 8 * ce_e, [&] {
      cuda::ce_finish(a.f(), targets.as<std::int32_t>(), b.f(), ce_rows, vocab, 0, vocab, row_max.f(),
                      row_sums.as<double>(), 1.0f, sum.as<double>(), nullptr);
    });

    const std::size_t hidden = 1024, ln_rows = n_ / hidden;
    const double ln_e = static_cast<double>(ln_rows * hidden);
    const std::string lnshape = std::to_string(ln_rows) + "x" + std::to_string(hidden);
    DeviceArray gamma(hidden, 1.0f), beta(hidden, 0.0f), mean(ln_rows, 0.0f), rstd(ln_rows, 1.0f);
    DeviceArray dgamma(hidden, 0.0f), dbeta(hidden, 0.0f);
    add("layernorm_forward", lnshape, 8 * ln_e, [&] {
      cuda::layernorm_forward(a.f(), gamma.f(), beta.f(), b.f(), mean.f(), rstd.f(), ln_rows, hidden, 1e-5f, nullptr);
    });
    add("layernorm_backward", lnshape, 12 * ln_e, [&] {
      cuda::layernorm_backward(a.f(), gamma.f(), mean.f(), rstd.f(), g.f(), c.f(), dgamma.f(), dbeta.f(), ln_rows,
                               hidden, nullptr);
    });
    // Attention's memory-bound kernels at a GPT-2-small head shape (12 heads of 64 on this rank, T = 1024).
    const std::size_t heads = 12, head_dim = 64, seq = 1024;
    const std::size_t seqs = n_ / (3 * heads * head_dim * seq);
    if (seqs > 0) {
      const std::string hshape = std::to_string(seqs) + "x" + std::to_string(heads) + "x" + std::to_string(seq) + "x" +
                                 std::to_string(head_dim);
      const double he = static_cast<double>(seqs * heads * seq * head_dim);
      add("split_heads (qkv)", hshape, 24 * he,
          [&] { cuda::split_heads(a.f(), b.f(), c.f(), d.f(), seqs, heads, seq, head_dim, nullptr); });
      add("split_heads_backward", hshape, 24 * he,
          [&] { cuda::split_heads_backward(b.f(), c.f(), d.f(), a.f(), seqs, heads, seq, head_dim, nullptr); });
      add("merge_heads", hshape, 8 * he, [&] { cuda::merge_heads(b.f(), c.f(), seqs, heads, seq, head_dim, nullptr); });
      add("merge_heads_backward", hshape, 8 * he,
          [&] { cuda::merge_heads_backward(c.f(), b.f(), seqs, heads, seq, head_dim, nullptr); });
    }
    const std::size_t sm_blocks = n_ / (seq * seq);
    if (sm_blocks > 0) {
      // Minimum traffic: the lower triangle read (twice for the backward's two inputs), every entry written. In place,
      // call after call: probabilities are valid scores too.
      const double tri = static_cast<double>(sm_blocks * seq * (seq + 1) / 2),
                   full = static_cast<double>(sm_blocks * seq * seq);
      const std::string sshape = std::to_string(sm_blocks) + "x" + std::to_string(seq) + "x" + std::to_string(seq);
      add("causal_softmax_forward", sshape, 4 * (tri + full),
          [&] { cuda::causal_softmax_forward(a.f(), sm_blocks, seq, 0.125f, nullptr); });
      add("causal_softmax_backward", sshape, 4 * (2 * tri + full),
          [&] { cuda::causal_softmax_backward(a.f(), g.f(), c.f(), sm_blocks, seq, 0.125f, nullptr); });
    }
    cudaDeviceProp prop{};
    TENAX_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    return print_table(std::string("CUDA kernels on ") + prop.name +
                           " vs device-to-device cudaMemcpy of the same bytes (target >= 80%)",
                       "D2D copy", rows_, kTarget);
  }

 private:
  Options o_;
  std::size_t n_;
  DeviceArray copy_src_, copy_dst_;
  std::vector<Row> rows_;
};

// Matmul rates at a size that fills the GPU: fp32 through the library's cuda::gemm (no TF32), and bf16 and fp16 inputs
// with fp32 accumulation through cublasGemmEx (bf16: the reference rate for model FLOP utilisation) beside tenax's
// cuda::gemm_lowp of the same inputs.
void gpu_matmul_rates(const Options& o) {
  std::printf("\nCUDA matmul rates (C = A B, square)\n%-34s %8s %10s %10s\n", "path", "m=n=k", "time ms", "TFLOP/s");
  cublasHandle_t handle;
  TENAX_CUBLAS_CHECK(cublasCreate(&handle));
  void* own_handle = cuda::create_blas_handle();
  for (std::size_t s : {std::size_t{4096}, std::size_t{8192}}) {
    const double flops = 2.0 * s * s * s;
    DeviceArray a(s * s, 0.1f), b(s * s, 0.2f), c(s * s, 0.0f);
    const double t32 = median_device_seconds(
        o.reps, [&] { cuda::gemm(Trans::No, Trans::No, s, s, s, 1.0f, a.f(), s, b.f(), s, 0.0f, c.f(), s, nullptr); });
    std::printf("%-34s %8zu %10.3f %10.1f\n", "fp32 (tenax cuda::gemm)", s, t32 * 1e3, flops / t32 / 1e12);
    DeviceArray a16(s * s * 2), b16(s * s * 2), c16(s * s * 2);
    const float alpha = 1.0f, beta = 0.0f;
    const int is = static_cast<int>(s);
    for (DType type : {DType::BF16, DType::F16}) {
      const std::string name(dtype_name(type));
      const cudaDataType_t cuda_type = type == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
      cuda::cast_from_f32(a.f(), a16.f(), type, s * s, nullptr);
      cuda::cast_from_f32(b.f(), b16.f(), type, s * s, nullptr);
      const double t16 = median_device_seconds(o.reps, [&] {
        TENAX_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, is, is, is, &alpha, b16.f(), cuda_type, is,
                                        a16.f(), cuda_type, is, &beta, c16.f(), cuda_type, is, CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT));
      });
      std::printf("%-34s %8zu %10.3f %10.1f\n", (name + " in/out, fp32 accumulate").c_str(), s, t16 * 1e3,
                  flops / t16 / 1e12);
      // The training path's product: 16-bit inputs, fp32 accumulation into an fp32 C (tenax cuda::gemm_lowp).
      const double tlow = median_device_seconds(o.reps, [&] {
        cuda::gemm_lowp(type, Trans::No, Trans::No, s, s, s, 1.0f, a16.f(), s, b16.f(), s, 0.0f, c.f(), s, nullptr,
                        own_handle);
      });
      std::printf("%-34s %8zu %10.3f %10.1f\n", (name + " in, fp32 out (cuda::gemm_lowp)").c_str(), s, tlow * 1e3,
                  flops / tlow / 1e12);
    }
  }
  cuda::destroy_blas_handle(own_handle);
  TENAX_CUBLAS_CHECK(cublasDestroy(handle));
}

// The attention core (cuda::attention_forward/backward: strided-batched cuBLAS products + the softmax kernels) at a
// GPT-2-small rank shape. TFLOP/s counts the full T x T products the batched path computes (forward 4 B H T^2 D,
// backward 8 B H T^2 D, recomputation 2 B H T^2 D more), half of which fall on masked entries.
void gpu_attention_core(const Options& o) {
  std::printf("\nCUDA attention core (batched products + softmax kernels)\n%-18s %-6s %-11s %10s %10s %10s %10s\n",
              "B x H x T x D", "type", "P", "fwd ms", "bwd ms", "total ms", "TFLOP/s");
  const std::size_t B = 8, H = 12, T = 1024, D = 64, e = B * H * T * D, scores = B * H * T * T;
  DeviceArray q(e, 0.1f), k(e, -0.2f), v(e, 0.3f), dout(e, 0.01f), out(e, 0.0f), dq(e, 0.0f), dk(e, 0.0f), dv(e, 0.0f),
      probs(scores, 0.0f);
  void* handle = cuda::create_blas_handle();
  const double flop = static_cast<double>(B * H) * static_cast<double>(T * T * D);
  for (DType type : {DType::F32, DType::BF16})
    for (bool saved : {true, false}) {
      float* p = saved ? probs.f() : nullptr;
      const std::size_t fwd_bytes = cuda::attention_forward_workspace_bytes(B, H, T, D, type, saved);
      const std::size_t bwd_bytes = cuda::attention_backward_workspace_bytes(B, H, T, D, type, saved);
      DeviceArray ws(std::max<std::size_t>({fwd_bytes, bwd_bytes, 256}));
      const double f = median_device_seconds(o.reps, [&] {
        cuda::attention_forward(q.f(), k.f(), v.f(), out.f(), p, B, H, T, D, 0.125f, type, ws.f(), fwd_bytes, nullptr,
                                handle);
      });
      const double b = median_device_seconds(o.reps, [&] {
        cuda::attention_backward(q.f(), k.f(), v.f(), dout.f(), p, dq.f(), dk.f(), dv.f(), B, H, T, D, 0.125f, type,
                                 ws.f(), bwd_bytes, nullptr, handle);
      });
      std::printf("%-18s %-6s %-11s %10.3f %10.3f %10.3f %10.1f\n", "8x12x1024x64", dtype_name(type).data(),
                  saved ? "saved" : "recomputed", f * 1e3, b * 1e3, (f + b) * 1e3,
                  flop * (saved ? 12 : 14) / (f + b) / 1e12);
    }
  cuda::destroy_blas_handle(handle);

  // cuDNN's fused attention at the same shape, on the packed QKV rows (the layer's layout): the kernels alone, then
  // with the casts the layer adds around them (fp32 QKV and output to and from bf16 in the forward; output, output
  // gradient and QKV gradient in the backward). TFLOP/s counts the same full products as the rows above, so the
  // columns compare; the fused kernels skip the masked half.
  const cuda::FusedAttentionShape shape{B, H, T, D, DType::BF16, 0.125f};
  // The first call for a problem opens cuDNN (first use in the process) and builds both graphs; later calls find them.
  const auto build_start = std::chrono::steady_clock::now();
  const std::string why = cuda::fused_attention_unsupported(shape);
  const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - build_start).count();
  std::printf("# cuDNN fused attention set-up (first call for this problem: open cuDNN, build both graphs): %.1f ms\n",
              build_s * 1e3);
  if (!why.empty()) {
    std::printf("%-18s %-6s %-11s cuDNN fused attention unavailable: %s\n", "8x12x1024x64", "bf16", "fused",
                why.c_str());
    return;
  }
  DeviceArray qkv32(3 * e, 0.1f), dqkv32(3 * e, 0.0f), qkv16(3 * e / 2 + 1, 0.0f), y16(e / 2 + 1, 0.0f),
      dy16(e / 2 + 1, 0.0f), dqkv16(3 * e / 2 + 1, 0.0f), stats(B * H * T, 0.0f);
  cuda::cast_from_f32(qkv32.f(), qkv16.f(), DType::BF16, 3 * e, nullptr);
  cuda::cast_from_f32(dout.f(), dy16.f(), DType::BF16, e, nullptr);
  const std::size_t fwd_bytes = cuda::fused_attention_forward_workspace_bytes(shape);
  const std::size_t bwd_bytes = cuda::fused_attention_backward_workspace_bytes(shape);
  DeviceArray ws(std::max<std::size_t>({fwd_bytes, bwd_bytes, 256}) / sizeof(float) + 1, 0.0f);
  for (bool casts : {false, true}) {
    const double f = median_device_seconds(o.reps, [&] {
      if (casts) cuda::cast_from_f32(qkv32.f(), qkv16.f(), DType::BF16, 3 * e, nullptr);
      cuda::fused_attention_forward(shape, qkv16.f(), y16.f(), stats.f(), ws.f(), fwd_bytes, nullptr);
      if (casts) cuda::cast_to_f32(y16.f(), DType::BF16, out.f(), e, nullptr);
    });
    const double b = median_device_seconds(o.reps, [&] {
      if (casts) {
        cuda::cast_from_f32(out.f(), y16.f(), DType::BF16, e, nullptr);
        cuda::cast_from_f32(dout.f(), dy16.f(), DType::BF16, e, nullptr);
      }
      cuda::fused_attention_backward(shape, qkv16.f(), y16.f(), dy16.f(), stats.f(), dqkv16.f(), ws.f(), bwd_bytes,
                                     nullptr);
      if (casts) cuda::cast_to_f32(dqkv16.f(), DType::BF16, dqkv32.f(), 3 * e, nullptr);
    });
    std::printf("%-18s %-6s %-11s %10.3f %10.3f %10.3f %10.1f\n", "8x12x1024x64", "bf16",
                casts ? "fused+casts" : "fused", f * 1e3, b * 1e3, (f + b) * 1e3, flop * 12 / (f + b) / 1e12);
  }
  std::printf("# %s\n", cuda::fused_attention_description(shape).c_str());
}

}  // namespace

int run_gpu_benchmarks(const Options& o) {
  const int below = GpuBench(o).run();
  gpu_matmul_rates(o);
  gpu_attention_core(o);
  return below;
}

}  // namespace tenax::bench
