// Row-structured kernels on row-major [rows x cols] blocks: bias + GeLU (forward element-wise, backward with a
// per-column bias reduction), softmax cross-entropy and layer normalisation (one block per row, block reductions).
// Every kernel moves 16-byte vectors when cols % 4 == 0 and the pointers are 16-byte aligned.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "common/math.hpp"
#include "common/validate.hpp"
#include "cuda/check.hpp"
#include "cuda/column_sum.cuh"
#include "cuda/device_util.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/launch.hpp"
#include "tenax/kernels/activation.hpp"
#include "tenax/kernels/layernorm.hpp"
#include "tenax/kernels/loss.hpp"

namespace tenax::kernels::cuda {
namespace {

using detail::FloatVec;
using detail::kVec;

// Cross-entropy reads each row twice (the reduction, then the gradient); the second read should hit L2. With
// 1024-thread blocks, 2 rows per SM are in flight: 264 rows of a 32K vocabulary on an H100 (35 MB) fit its 50 MB L2,
// where 256-thread blocks (8 rows per SM) would not. One block per row: a vocabulary row has tens of thousands of
// columns.
constexpr int kRowThreads = 1024;
constexpr int kNormThreads = 128;  // layer-norm rows are the hidden size (hundreds to a few thousand)

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

bool all_vec_aligned(std::initializer_list<const void*> pointers, std::size_t cols) {
  if (cols % kVec != 0) return false;
  for (const void* p : pointers)
    if (p != nullptr && !detail::aligned(p, kVec * sizeof(float))) return false;
  return true;
}

struct BiasGeluForwardOp {
  const float* in;
  const float* bias;
  float* out;
  std::size_t cols;
  template <int V>
  __device__ void apply(std::size_t e) {
    FloatVec<V> x = detail::load<V>(in, e);
    const FloatVec<V> b = detail::load<V>(bias, e % cols);  // V divides cols: a group never spans two rows
    for (int k = 0; k < V; ++k)
      x.v[k] = detail::gelu_tanh(x.v[k] + b.v[k]);
    detail::store<V>(out, e, x);
  }
  __device__ void finish() {}
};

struct BiasGeluBackwardElem {
  const float* in;
  const float* bias;
  const float* dout;
  float* din;
  std::size_t cols;
  template <int V>
  __device__ void apply(std::size_t r, std::size_t c, float (&acc)[1][V]) const {
    const std::size_t e = r * cols + c;
    const FloatVec<V> x = detail::load<V>(in, e);
    const FloatVec<V> b = detail::load<V>(bias, c);
    FloatVec<V> d = detail::load<V>(dout, e);
    for (int k = 0; k < V; ++k) {
      d.v[k] *= detail::gelu_tanh_grad(x.v[k] + b.v[k]);
      acc[0][k] += d.v[k];
    }
    detail::store<V>(din, e, d);
  }
};

template <int V>
__global__ void __launch_bounds__(kRowThreads)
    cross_entropy_kernel(const float* logits, const std::int32_t* targets, float* dlogits, std::size_t rows,
                         std::size_t vocab, float row_scale, double* loss_sum) {
  double block_loss = 0.0;  // accumulated by thread 0 only
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = logits + r * vocab;
    // Pass 1: per-thread running maximum and sum of exp(x - max) (rescaled when the maximum grows).
    float m = -FLT_MAX, s = 0.0f;
    for (std::size_t j = threadIdx.x * V; j < vocab; j += std::size_t{blockDim.x} * V) {
      const FloatVec<V> f = detail::load<V>(x, j);
      for (int k = 0; k < V; ++k) {
        if (f.v[k] > m) {
          s = s * expf(m - f.v[k]) + 1.0f;
          m = f.v[k];
        } else {
          s += expf(f.v[k] - m);  // NaN logits fall here and make the sum NaN, as they should
        }
      }
    }
    const float row_max = detail::block_reduce(m, Max{}, -FLT_MAX);
    const std::int32_t t = targets[r];
    const bool valid = t >= 0 && static_cast<std::size_t>(t) < vocab;
    // Read before the barrier inside the next reduction: after it, pass 2 may overwrite x when dlogits aliases logits.
    const float x_target = (threadIdx.x == 0 && valid) ? x[t] : 0.0f;
    const float sum = detail::block_reduce(s * expf(m - row_max), detail::Sum{}, 0.0f);
    if (dlogits != nullptr) {
      float* g = dlogits + r * vocab;
      const float scale = valid ? row_scale / sum : NAN;
      for (std::size_t j = threadIdx.x * V; j < vocab; j += std::size_t{blockDim.x} * V) {
        FloatVec<V> f = detail::load<V>(x, j);
        for (int k = 0; k < V; ++k) {
          f.v[k] = expf(f.v[k] - row_max) * scale;
          if (j + k == static_cast<std::size_t>(t)) f.v[k] -= row_scale;
        }
        detail::store<V>(g, j, f);
      }
    }
    if (threadIdx.x == 0)
      block_loss += valid ? log(static_cast<double>(sum)) - (static_cast<double>(x_target) - row_max) : NAN;
  }
  if (threadIdx.x == 0) atomicAdd(loss_sum, block_loss);
}

template <int V>
__global__ void __launch_bounds__(kNormThreads)
    layernorm_forward_kernel(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                             std::size_t rows, std::size_t cols, float eps) {
  const std::size_t step = std::size_t{blockDim.x} * V;
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    // Two passes (mean, then the centred sum of squares), as on the CPU: the row is re-read from L1/L2, not DRAM.
    float s = 0.0f;
    for (std::size_t j = threadIdx.x * V; j < cols; j += step) {
      const FloatVec<V> f = detail::load<V>(xr, j);
      for (int k = 0; k < V; ++k)
        s += f.v[k];
    }
    const float mu = detail::block_reduce(s, detail::Sum{}, 0.0f) / static_cast<float>(cols);
    float q = 0.0f;
    for (std::size_t j = threadIdx.x * V; j < cols; j += step) {
      const FloatVec<V> f = detail::load<V>(xr, j);
      for (int k = 0; k < V; ++k)
        q += (f.v[k] - mu) * (f.v[k] - mu);
    }
    const float var = detail::block_reduce(q, detail::Sum{}, 0.0f) / static_cast<float>(cols);
    const float rs = 1.0f / sqrtf(var + eps);
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    float* yr = y + r * cols;
    for (std::size_t j = threadIdx.x * V; j < cols; j += step) {
      FloatVec<V> f = detail::load<V>(xr, j);
      const FloatVec<V> g = detail::load<V>(gamma, j), b = detail::load<V>(beta, j);
      for (int k = 0; k < V; ++k)
        f.v[k] = (f.v[k] - mu) * rs * g.v[k] + b.v[k];
      detail::store<V>(yr, j, f);
    }
  }
}

template <int V>
__global__ void __launch_bounds__(kNormThreads)
    layernorm_backward_dx_kernel(const float* x, const float* gamma, const float* mean, const float* rstd,
                                 const float* dy, float* dx, std::size_t rows, std::size_t cols) {
  const std::size_t step = std::size_t{blockDim.x} * V;
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    const float mu = mean[r], rs = rstd[r];
    float sum_g = 0.0f, sum_g_xhat = 0.0f;
    for (std::size_t j = threadIdx.x * V; j < cols; j += step) {
      const FloatVec<V> xv = detail::load<V>(xr, j), d = detail::load<V>(dyr, j), g = detail::load<V>(gamma, j);
      for (int k = 0; k < V; ++k) {
        const float gk = d.v[k] * g.v[k];
        sum_g += gk;
        sum_g_xhat += gk * (xv.v[k] - mu) * rs;
      }
    }
    const float inv_cols = 1.0f / static_cast<float>(cols);
    const float mean_g = detail::block_reduce(sum_g, detail::Sum{}, 0.0f) * inv_cols;
    const float mean_g_xhat = detail::block_reduce(sum_g_xhat, detail::Sum{}, 0.0f) * inv_cols;
    float* dxr = dx + r * cols;
    for (std::size_t j = threadIdx.x * V; j < cols; j += step) {
      const FloatVec<V> xv = detail::load<V>(xr, j), g = detail::load<V>(gamma, j);
      FloatVec<V> d = detail::load<V>(dyr, j);
      for (int k = 0; k < V; ++k)
        d.v[k] = rs * (d.v[k] * g.v[k] - mean_g - (xv.v[k] - mu) * rs * mean_g_xhat);
      detail::store<V>(dxr, j, d);
    }
  }
}

struct LayerNormParamGradElem {
  const float* x;
  const float* mean;
  const float* rstd;
  const float* dy;
  std::size_t cols;
  template <int V>
  __device__ void apply(std::size_t r, std::size_t c, float (&acc)[2][V]) const {
    const std::size_t e = r * cols + c;
    const FloatVec<V> xv = detail::load<V>(x, e), d = detail::load<V>(dy, e);
    const float mu = mean[r], rs = rstd[r];
    for (int k = 0; k < V; ++k) {
      acc[0][k] += d.v[k] * ((xv.v[k] - mu) * rs);
      acc[1][k] += d.v[k];
    }
  }
};

int row_blocks(std::size_t rows, int threads) {
  return static_cast<int>(std::min<std::size_t>(rows, detail::resident_blocks(threads)));
}

}  // namespace

void bias_gelu_forward(const float* in, const float* bias, float* out, std::size_t rows, std::size_t cols,
                       void* stream) {
  detail::require_pointer("bias_gelu_forward", in, rows * cols, "in");
  detail::require_pointer("bias_gelu_forward", bias, cols, "bias");
  detail::require_pointer("bias_gelu_forward", out, rows * cols, "out");
  detail::launch_elementwise(rows * cols, all_vec_aligned({in, bias, out}, cols),
                             BiasGeluForwardOp{in, bias, out, cols}, stream);
}

void bias_gelu_backward(const float* in, const float* bias, const float* dout, float* din, float* dbias,
                        std::size_t rows, std::size_t cols, void* stream) {
  detail::require_pointer("bias_gelu_backward", in, rows * cols, "in");
  detail::require_pointer("bias_gelu_backward", bias, cols, "bias");
  detail::require_pointer("bias_gelu_backward", dout, rows * cols, "dout");
  detail::require_pointer("bias_gelu_backward", din, rows * cols, "din");
  detail::require_pointer("bias_gelu_backward", dbias, cols, "dbias");
  detail::launch_column_sum<1>(rows, cols, all_vec_aligned({in, bias, dout, din, dbias}, cols),
                               BiasGeluBackwardElem{in, bias, dout, din, cols}, dbias, nullptr, stream);
}

void softmax_cross_entropy(const float* logits, const std::int32_t* targets, float* dlogits, std::size_t rows,
                           std::size_t vocab, float grad_scale, double* loss_sum_device, void* stream) {
  detail::require_pointer("softmax_cross_entropy", loss_sum_device, 1, "loss_sum_device");
  TENAX_CUDA_CHECK(cudaMemsetAsync(loss_sum_device, 0, sizeof(double), detail::to_stream(stream)));
  if (rows == 0) return;
  if (vocab == 0) detail::usage_error("softmax_cross_entropy", "vocab is 0; the logits need at least one column");
  detail::require_pointer("softmax_cross_entropy", logits, rows * vocab, "logits");
  detail::require_pointer("softmax_cross_entropy", targets, rows, "targets");
  const float row_scale = grad_scale / static_cast<float>(rows);
  const int blocks = row_blocks(rows, kRowThreads);
  auto* s = detail::to_stream(stream);
  if (all_vec_aligned({logits, dlogits}, vocab))
    cross_entropy_kernel<kVec>
        <<<blocks, kRowThreads, 0, s>>>(logits, targets, dlogits, rows, vocab, row_scale, loss_sum_device);
  else
    cross_entropy_kernel<1>
        <<<blocks, kRowThreads, 0, s>>>(logits, targets, dlogits, rows, vocab, row_scale, loss_sum_device);
  TENAX_CUDA_CHECK_LAUNCH(cross_entropy_kernel);
}

void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd,
                       std::size_t rows, std::size_t cols, float eps, void* stream) {
  if (cols == 0) detail::usage_error("layernorm_forward", "cols is 0; a row needs at least one element");
  if (!(eps > 0.0f)) detail::usage_error("layernorm_forward", "eps must be > 0");
  detail::require_pointer("layernorm_forward", x, rows * cols, "x");
  detail::require_pointer("layernorm_forward", y, rows * cols, "y");
  detail::require_pointer("layernorm_forward", gamma, rows ? cols : 0, "gamma");
  detail::require_pointer("layernorm_forward", beta, rows ? cols : 0, "beta");
  detail::require_pointer("layernorm_forward", mean, rows, "mean");
  detail::require_pointer("layernorm_forward", rstd, rows, "rstd");
  if (rows == 0) return;
  const int blocks = row_blocks(rows, kNormThreads);
  auto* s = detail::to_stream(stream);
  if (all_vec_aligned({x, gamma, beta, y}, cols))
    layernorm_forward_kernel<kVec><<<blocks, kNormThreads, 0, s>>>(x, gamma, beta, y, mean, rstd, rows, cols, eps);
  else
    layernorm_forward_kernel<1><<<blocks, kNormThreads, 0, s>>>(x, gamma, beta, y, mean, rstd, rows, cols, eps);
  TENAX_CUDA_CHECK_LAUNCH(layernorm_forward_kernel);
}

void layernorm_backward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dy,
                        float* dx, float* dgamma, float* dbeta, std::size_t rows, std::size_t cols, void* stream) {
  if (cols == 0) detail::usage_error("layernorm_backward", "cols is 0; a row needs at least one element");
  detail::require_pointer("layernorm_backward", x, rows * cols, "x");
  detail::require_pointer("layernorm_backward", dy, rows * cols, "dy");
  detail::require_pointer("layernorm_backward", dx, rows * cols, "dx");
  detail::require_pointer("layernorm_backward", gamma, rows ? cols : 0, "gamma");
  detail::require_pointer("layernorm_backward", dgamma, rows ? cols : 0, "dgamma");
  detail::require_pointer("layernorm_backward", dbeta, rows ? cols : 0, "dbeta");
  detail::require_pointer("layernorm_backward", mean, rows, "mean");
  detail::require_pointer("layernorm_backward", rstd, rows, "rstd");
  if (rows == 0) return;
  auto* s = detail::to_stream(stream);
  // The parameter gradients first: they read dy, which dx may overwrite when the two alias.
  detail::launch_column_sum<2>(rows, cols, all_vec_aligned({x, dy, dgamma, dbeta}, cols),
                               LayerNormParamGradElem{x, mean, rstd, dy, cols}, dgamma, dbeta, stream);
  const int blocks = row_blocks(rows, kNormThreads);
  if (all_vec_aligned({x, gamma, dy, dx}, cols))
    layernorm_backward_dx_kernel<kVec><<<blocks, kNormThreads, 0, s>>>(x, gamma, mean, rstd, dy, dx, rows, cols);
  else
    layernorm_backward_dx_kernel<1><<<blocks, kNormThreads, 0, s>>>(x, gamma, mean, rstd, dy, dx, rows, cols);
  TENAX_CUDA_CHECK_LAUNCH(layernorm_backward_dx_kernel);
}

}  // namespace tenax::kernels::cuda
