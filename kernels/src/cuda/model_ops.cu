// The model's small CUDA kernels that are not a cast, an optimizer step or a row normalisation: the residual addition,
// a linear layer's bias and its gradient, the embedding lookup and its gradient, and the three phases of the
// vocabulary-parallel cross-entropy.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "common/validate.hpp"
#include "cuda/check.hpp"
#include "cuda/column_sum.cuh"
#include "cuda/device_util.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/launch.hpp"
#include "tenax/kernels/elementwise.hpp"
#include "tenax/kernels/embedding.hpp"
#include "tenax/kernels/vocab_parallel_loss.hpp"

namespace tenax::kernels::cuda {
namespace {

using detail::FloatVec;
using detail::kThreads;
using detail::kVec;

constexpr int kRowThreads = 256;  // one block per row for the row kernels (local vocabulary or feature rows)

bool vec_aligned(const void* p) {
  return p == nullptr || detail::aligned(p, kVec * sizeof(float));
}

struct AddOp {
  float* y;
  const float* x;
  template <int V>
  __device__ void apply(std::size_t e) {
    FloatVec<V> a = detail::load<V>(y, e);
    const FloatVec<V> b = detail::load<V>(x, e);
    for (int k = 0; k < V; ++k)
      a.v[k] += b.v[k];
    detail::store<V>(y, e, a);
  }
  __device__ void finish() {}
};

struct BiasAddOp {
  float* y;
  const float* bias;
  std::size_t cols;
  template <int V>
  __device__ void apply(std::size_t e) {
    FloatVec<V> a = detail::load<V>(y, e);
    const FloatVec<V> b = detail::load<V>(bias, e % cols);  // V divides cols: a group never spans two rows
    for (int k = 0; k < V; ++k)
      a.v[k] += b.v[k];
    detail::store<V>(y, e, a);
  }
  __device__ void finish() {}
};

struct ColumnOfDy {
  const float* dy;
  std::size_t cols;
  template <int V>
  __device__ void apply(std::size_t r, std::size_t c, float (&acc)[1][V]) const {
    const FloatVec<V> d = detail::load<V>(dy, r * cols + c);
    for (int k = 0; k < V; ++k)
      acc[0][k] += d.v[k];
  }
};

// One block per row (grid-stride over rows): each thread copies or adds a strided part of the row.
__global__ void __launch_bounds__(kRowThreads)
    embedding_forward_kernel(const std::int32_t* tokens, const float* table, float* y, std::size_t rows,
                             std::size_t features, std::size_t vocab) {
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int32_t t = tokens[r];
    const bool valid = t >= 0 && static_cast<std::size_t>(t) < vocab;
    const float* src = table + (valid ? static_cast<std::size_t>(t) * features : 0);
    float* dst = y + r * features;
    for (std::size_t c = threadIdx.x; c < features; c += blockDim.x)
      dst[c] = valid ? src[c] : NAN;
  }
}

__global__ void __launch_bounds__(kRowThreads)
    embedding_backward_kernel(const std::int32_t* tokens, const float* dy, float* table_grad, std::size_t rows,
                              std::size_t features, std::size_t vocab) {
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int32_t t = tokens[r];
    if (t < 0 || static_cast<std::size_t>(t) >= vocab) continue;  // uniform per block: no barrier is skipped
    float* g = table_grad + static_cast<std::size_t>(t) * features;
    const float* d = dy + r * features;
    for (std::size_t c = threadIdx.x; c < features; c += blockDim.x)
      atomicAdd(g + c, d[c]);
  }
}

__global__ void __launch_bounds__(kRowThreads)
    embedding_slice_forward_kernel(const std::int32_t* tokens, const float* table, float* y, std::size_t rows,
                                   std::size_t features, std::size_t vocab, std::size_t vocab_begin,
                                   std::size_t vocab_local) {
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int32_t t = tokens[r];
    const bool valid = t >= 0 && static_cast<std::size_t>(t) < vocab;
    const bool held =
        valid && static_cast<std::size_t>(t) >= vocab_begin && static_cast<std::size_t>(t) - vocab_begin < vocab_local;
    const float* src = table + (held ? (static_cast<std::size_t>(t) - vocab_begin) * features : 0);
    float* dst = y + r * features;
    for (std::size_t c = threadIdx.x; c < features; c += blockDim.x)
      dst[c] = held ? src[c] : (valid ? 0.0f : NAN);
  }
}

__global__ void __launch_bounds__(kRowThreads)
    embedding_slice_backward_kernel(const std::int32_t* tokens, const float* dy, float* table_grad, std::size_t rows,
                                    std::size_t features, std::size_t vocab_begin, std::size_t vocab_local) {
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int32_t t = tokens[r];
    // Uniform per block: no barrier is skipped.
    if (t < 0 || static_cast<std::size_t>(t) < vocab_begin || static_cast<std::size_t>(t) - vocab_begin >= vocab_local)
      continue;
    float* g = table_grad + (static_cast<std::size_t>(t) - vocab_begin) * features;
    const float* d = dy + r * features;
    for (std::size_t c = threadIdx.x; c < features; c += blockDim.x)
      atomicAdd(g + c, d[c]);
  }
}

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__global__ void __launch_bounds__(kRowThreads)
    ce_row_max_kernel(const float* logits, std::size_t rows, std::size_t vocab_local, std::size_t ld, float* row_max) {
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = logits + r * ld;
    float m = -INFINITY;
    for (std::size_t c = threadIdx.x; c < vocab_local; c += blockDim.x)
      m = fmaxf(m, x[c]);
    m = detail::block_reduce(m, Max{}, -INFINITY);
    if (threadIdx.x == 0) row_max[r] = m;
  }
}

__global__ void __launch_bounds__(kRowThreads)
    ce_row_sums_kernel(const float* logits, const std::int32_t* targets, std::size_t rows, std::size_t vocab_local,
                       std::size_t ld, std::size_t vocab_begin, const float* row_max, double* sums) {
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = logits + r * ld;
    const float m = row_max[r];
    // Each term is <= 1 (x <= the global maximum): a per-thread fp32 partial loses nothing that matters against the
    // double total the block reduction forms.
    float s = 0.0f;
    for (std::size_t c = threadIdx.x; c < vocab_local; c += blockDim.x)
      s += expf(x[c] - m);
    const double total = detail::block_reduce(static_cast<double>(s), detail::Sum{}, 0.0);
    if (threadIdx.x == 0) {
      sums[r] = total;
      const auto t = static_cast<std::size_t>(static_cast<std::int64_t>(targets[r]));
      sums[rows + r] =
          t >= vocab_begin && t < vocab_begin + vocab_local ? static_cast<double>(x[t - vocab_begin]) : 0.0;
    }
  }
}

__global__ void __launch_bounds__(kRowThreads)
    ce_finish_kernel(const float* logits, const std::int32_t* targets, float* dlogits, std::size_t rows,
                     std::size_t vocab_local, std::size_t ld, std::size_t vocab_begin, std::size_t vocab,
                     const float* row_max, const double* sums, float grad_scale, double* loss_sum) {
  double block_loss = 0.0;  // thread 0 only
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int32_t t = targets[r];
    const bool valid = t >= 0 && static_cast<std::size_t>(t) < vocab;
    const float m = row_max[r];
    if (threadIdx.x == 0)
      block_loss += valid ? log(sums[r]) + static_cast<double>(m) - sums[rows + r] : static_cast<double>(NAN);
    if (dlogits == nullptr) continue;
    const float* x = logits + r * ld;
    float* g = dlogits + r * ld;
    const float inv_sum = valid ? static_cast<float>(1.0 / sums[r]) : NAN;
    // Each element is read and then written by the same thread, so dlogits may alias logits.
    for (std::size_t c = threadIdx.x; c < vocab_local; c += blockDim.x) {
      float p = expf(x[c] - m) * inv_sum;
      if (vocab_begin + c == static_cast<std::size_t>(t)) p -= 1.0f;
      g[c] = p * grad_scale;
    }
  }
  if (threadIdx.x == 0 && block_loss != 0.0) atomicAdd(loss_sum, block_loss);
}

int row_blocks(std::size_t rows) {
  return static_cast<int>(std::min<std::size_t>(rows, detail::resident_blocks(kRowThreads)));
}

}  // namespace

void add_inplace(float* y, const float* x, std::size_t n, void* stream) {
  detail::require_pointer("add_inplace", y, n, "y");
  detail::require_pointer("add_inplace", x, n, "x");
  detail::launch_elementwise(n, vec_aligned(y) && vec_aligned(x), AddOp{y, x}, stream);
}

void bias_add(float* y, const float* bias, std::size_t rows, std::size_t cols, void* stream) {
  detail::require_pointer("bias_add", y, rows * cols, "y");
  detail::require_pointer("bias_add", bias, rows ? cols : 0, "bias");
  if (rows == 0 || cols == 0) return;
  detail::launch_elementwise(rows * cols, cols % kVec == 0 && vec_aligned(y) && vec_aligned(bias),
                             BiasAddOp{y, bias, cols}, stream);
}

void bias_grad(const float* dy, float* dbias, std::size_t rows, std::size_t cols, void* stream) {
  detail::require_pointer("bias_grad", dy, rows * cols, "dy");
  detail::require_pointer("bias_grad", dbias, rows ? cols : 0, "dbias");
  detail::launch_column_sum<1>(rows, cols, cols % kVec == 0 && vec_aligned(dy) && vec_aligned(dbias),
                               ColumnOfDy{dy, cols}, dbias, nullptr, stream);
}

void embedding_forward(const std::int32_t* tokens, const float* table, float* y, std::size_t rows, std::size_t features,
                       std::size_t vocab, void* stream) {
  detail::require_pointer("embedding_forward", tokens, rows, "tokens");
  detail::require_pointer("embedding_forward", table, rows ? vocab * features : 0, "table");
  detail::require_pointer("embedding_forward", y, rows * features, "y");
  if (rows == 0 || features == 0) return;
  embedding_forward_kernel<<<row_blocks(rows), kRowThreads, 0, detail::to_stream(stream)>>>(tokens, table, y, rows,
                                                                                            features, vocab);
  TENAX_CUDA_CHECK_LAUNCH(embedding_forward_kernel);
}

void embedding_backward(const std::int32_t* tokens, const float* dy, float* table_grad, std::size_t rows,
                        std::size_t features, std::size_t vocab, void* stream) {
  detail::require_pointer("embedding_backward", tokens, rows, "tokens");
  detail::require_pointer("embedding_backward", dy, rows * features, "dy");
  detail::require_pointer("embedding_backward", table_grad, rows ? features : 0, "table_grad");
  if (rows == 0 || features == 0) return;
  embedding_backward_kernel<<<row_blocks(rows), kRowThreads, 0, detail::to_stream(stream)>>>(tokens, dy, table_grad,
                                                                                             rows, features, vocab);
  TENAX_CUDA_CHECK_LAUNCH(embedding_backward_kernel);
}

void embedding_slice_forward(const std::int32_t* tokens, const float* table, float* y, std::size_t rows,
                             std::size_t features, std::size_t vocab, std::size_t vocab_begin, std::size_t vocab_local,
                             void* stream) {
  detail::require_pointer("embedding_slice_forward", tokens, rows, "tokens");
  detail::require_pointer("embedding_slice_forward", table, rows ? vocab_local * features : 0, "table");
  detail::require_pointer("embedding_slice_forward", y, rows * features, "y");
  if (vocab_begin > vocab || vocab_local > vocab - vocab_begin)
    detail::usage_error("embedding_slice_forward", "the slice is not inside the vocabulary");
  if (rows == 0 || features == 0) return;
  embedding_slice_forward_kernel<<<row_blocks(rows), kRowThreads, 0, detail::to_stream(stream)>>>(
      tokens, table, y, rows, features, vocab, vocab_begin, vocab_local);
  TENAX_CUDA_CHECK_LAUNCH(embedding_slice_forward_kernel);
}

void embedding_slice_backward(const std::int32_t* tokens, const float* dy, float* table_grad, std::size_t rows,
                              std::size_t features, std::size_t vocab_begin, std::size_t vocab_local, void* stream) {
  detail::require_pointer("embedding_slice_backward", tokens, rows, "tokens");
  detail::require_pointer("embedding_slice_backward", dy, rows * features, "dy");
  detail::require_pointer("embedding_slice_backward", table_grad, rows ? vocab_local * features : 0, "table_grad");
  if (rows == 0 || features == 0) return;
  embedding_slice_backward_kernel<<<row_blocks(rows), kRowThreads, 0, detail::to_stream(stream)>>>(
      tokens, dy, table_grad, rows, features, vocab_begin, vocab_local);
  TENAX_CUDA_CHECK_LAUNCH(embedding_slice_backward_kernel);
}

void ce_row_max(const float* logits, std::size_t rows, std::size_t vocab_local, float* row_max, void* stream,
                std::size_t ld) {
  ld = detail::row_stride("ce_row_max", vocab_local, ld);
  detail::require_pointer("ce_row_max", logits, detail::matrix_span("ce_row_max", rows, vocab_local, ld), "logits");
  detail::require_pointer("ce_row_max", row_max, rows, "row_max");
  if (rows == 0) return;
  ce_row_max_kernel<<<row_blocks(rows), kRowThreads, 0, detail::to_stream(stream)>>>(logits, rows, vocab_local, ld,
                                                                                     row_max);
  TENAX_CUDA_CHECK_LAUNCH(ce_row_max_kernel);
}

void ce_row_sums(const float* logits, const std::int32_t* targets, std::size_t rows, std::size_t vocab_local,
                 std::size_t vocab_begin, const float* row_max, double* sums, void* stream, std::size_t ld) {
  ld = detail::row_stride("ce_row_sums", vocab_local, ld);
  detail::require_pointer("ce_row_sums", logits, detail::matrix_span("ce_row_sums", rows, vocab_local, ld), "logits");
  detail::require_pointer("ce_row_sums", targets, rows, "targets");
  detail::require_pointer("ce_row_sums", row_max, rows, "row_max");
  detail::require_pointer("ce_row_sums", sums, 2 * rows, "sums");
  if (rows == 0) return;
  ce_row_sums_kernel<<<row_blocks(rows), kRowThreads, 0, detail::to_stream(stream)>>>(
      logits, targets, rows, vocab_local, ld, vocab_begin, row_max, sums);
  TENAX_CUDA_CHECK_LAUNCH(ce_row_sums_kernel);
}

void ce_finish(const float* logits, const std::int32_t* targets, float* dlogits, std::size_t rows,
               std::size_t vocab_local, std::size_t vocab_begin, std::size_t vocab, const float* row_max,
               const double* sums, float grad_scale, double* loss_sum, void* stream, std::size_t ld) {
  ld = detail::row_stride("ce_finish", vocab_local, ld);
  detail::require_pointer("ce_finish", logits, detail::matrix_span("ce_finish", rows, vocab_local, ld), "logits");
  detail::require_pointer("ce_finish", targets, rows, "targets");
  detail::require_pointer("ce_finish", row_max, rows, "row_max");
  detail::require_pointer("ce_finish", sums, 2 * rows, "sums");
  detail::require_pointer("ce_finish", loss_sum, 1, "loss_sum");
  if (rows == 0) return;
  ce_finish_kernel<<<row_blocks(rows), kRowThreads, 0, detail::to_stream(stream)>>>(
      logits, targets, dlogits, rows, vocab_local, ld, vocab_begin, vocab, row_max, sums, grad_scale, loss_sum);
  TENAX_CUDA_CHECK_LAUNCH(ce_finish_kernel);
}

}  // namespace tenax::kernels::cuda
