// The attention core's device kernels: head split/merge (a permutation of D-element pieces between the packed
// [B*T, parts*H*D] rows and the per-head [B, H, T, D] tensors) and the causal softmax and its backward, one warp per
// T-element row. No atomics; every row is owned by one warp.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <utility>

#include "common/attention_validate.hpp"
#include "cuda/check.hpp"
#include "cuda/device_util.cuh"
#include "cuda/launch.hpp"
#include "tenax/kernels/attention.hpp"

namespace tenax::kernels::cuda {
namespace {

using detail::FloatVec;

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kVec = 4;

// One block per packed row (grid-stride over rows); the block's threads walk the row in groups of V columns (V divides
// D, so a group never spans two pieces). kToHeads: packed -> heads, else heads -> packed. Both sides are contiguous
// over d, so reads and writes coalesce in D-element pieces.
struct Permute {
  const float* packed_in;
  float* packed_out;
  const float* heads_in[3];
  float* heads_out[3];
  unsigned parts, H, D;
  std::size_t rows, T;
};

template <int V, bool kToHeads>
__global__ void __launch_bounds__(kThreads) permute_heads_kernel(Permute a) {
  const unsigned width = a.parts * a.H * a.D;  // <= INT_MAX (attention_dims)
  for (std::size_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const std::size_t b = r / a.T, t = r % a.T;
    for (unsigned c = threadIdx.x * V; c < width; c += blockDim.x * V) {
      const unsigned h = c / (a.parts * a.D), rem = c % (a.parts * a.D), s = rem / a.D, d = rem % a.D;
      const std::size_t head = ((b * a.H + h) * a.T + t) * a.D + d;
      if constexpr (kToHeads)
        detail::store<V>(a.heads_out[s], head, detail::load<V>(a.packed_in, r * width + c));
      else
        detail::store<V>(a.packed_out, r * width + c, detail::load<V>(a.heads_in[s], head));
    }
  }
}

template <bool kToHeads>
void launch_permute(const char* op, Permute a, std::size_t B, std::size_t H, std::size_t T, std::size_t D,
                    void* stream) {
  const detail::AttentionDims dims = detail::attention_dims(op, B, H, T, D);
  const void* packed = kToHeads ? static_cast<const void*>(a.packed_in) : a.packed_out;
  detail::require_pointer(op, packed, dims.head_elems, kToHeads ? "the packed input" : "the packed output");
  bool vec = D % kVec == 0 && detail::aligned(packed, kVec * sizeof(float));
  for (unsigned s = 0; s < a.parts; ++s) {
    const void* head = kToHeads ? static_cast<const void*>(a.heads_out[s]) : a.heads_in[s];
    detail::require_pointer(op, head, dims.head_elems, kToHeads ? "a per-head output" : "a per-head input");
    vec = vec && detail::aligned(head, kVec * sizeof(float));
  }
  if (dims.head_elems == 0) return;
  a.H = static_cast<unsigned>(H);
  a.D = static_cast<unsigned>(D);
  a.rows = dims.rows;
  a.T = T;
  const int blocks = static_cast<int>(std::min<std::size_t>(dims.rows, detail::resident_blocks(kThreads)));
  auto* s = detail::to_stream(stream);
  if (vec)
    permute_heads_kernel<kVec, kToHeads><<<blocks, kThreads, 0, s>>>(a);
  else
    permute_heads_kernel<1, kToHeads><<<blocks, kThreads, 0, s>>>(a);
  TENAX_CUDA_CHECK_LAUNCH(permute_heads_kernel);
}

__device__ inline float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
  return v;
}

__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xFFFFFFFFu, v, offset);
  return v;
}

// Row r of the [rows, T] scores is query position i = r % T and keeps columns j <= i. Pass 1: each lane keeps a running
// maximum and a sum of exponentials rescaled when the maximum grows (one exp per element), combined over the warp.
// Pass 2 rereads the row (from L1/L2) and writes the probabilities and the zeros. Columns above the diagonal are loaded
// with their vector but never used.
template <int V>
__global__ void __launch_bounds__(kThreads)
    causal_softmax_forward_kernel(float* scores, std::size_t rows, unsigned T, float scale) {
  const unsigned lane = threadIdx.x % 32;
  const std::size_t warps = std::size_t{gridDim.x} * kWarpsPerBlock;
  for (std::size_t r = std::size_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32; r < rows; r += warps) {
    float* x = scores + r * T;
    const unsigned valid = static_cast<unsigned>(r % T) + 1;
    float m = -INFINITY, s = 0.0f;
    for (unsigned j = lane * V; j < valid; j += 32 * V) {
      const FloatVec<V> f = detail::load<V>(x, j);
      for (int k = 0; k < V; ++k) {
        if (j + k >= valid) break;
        const float t = scale * f.v[k];
        if (t > m) {
          s = s * expf(m - t) + 1.0f;
          m = t;
        } else if (t != -INFINITY) {  // a -inf score adds 0 (as on the CPU), even before any finite one was seen
          s += expf(t - m);           // a NaN score lands here and makes the row NaN
        }
      }
    }
    const float row_max = warp_max(m);
    // A lane that saw no column (m = -inf, s = 0) adds nothing (and must not compute exp(-inf - -inf) = NaN).
    const float inv = 1.0f / warp_sum(m == -INFINITY ? 0.0f : s * expf(m - row_max));
    for (unsigned j = lane * V; j < T; j += 32 * V) {
      FloatVec<V> f = detail::load<V>(x, j);
      for (int k = 0; k < V; ++k)
        f.v[k] = j + k < valid ? expf(scale * f.v[k] - row_max) * inv : 0.0f;
      detail::store<V>(x, j, f);
    }
  }
}

template <int V>
__global__ void __launch_bounds__(kThreads)
    causal_softmax_backward_kernel(const float* probs, const float* dprobs, float* dscores, std::size_t rows,
                                   unsigned T, float scale) {
  const unsigned lane = threadIdx.x % 32;
  const std::size_t warps = std::size_t{gridDim.x} * kWarpsPerBlock;
  for (std::size_t r = std::size_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32; r < rows; r += warps) {
    const float* p = probs + r * T;
    const float* dp = dprobs + r * T;
    float* ds = dscores + r * T;
    const unsigned valid = static_cast<unsigned>(r % T) + 1;
    float dot = 0.0f;
    for (unsigned j = lane * V; j < valid; j += 32 * V) {
      const FloatVec<V> a = detail::load<V>(p, j), b = detail::load<V>(dp, j);
      for (int k = 0; k < V; ++k)
        if (j + k < valid) dot += b.v[k] * a.v[k];
    }
    // ds may alias dp: every column is read and then written by the same lane (the same j in both loops).
    dot = warp_sum(dot);
    for (unsigned j = lane * V; j < T; j += 32 * V) {
      const FloatVec<V> a = detail::load<V>(p, j), b = detail::load<V>(dp, j);
      FloatVec<V> out;
      for (int k = 0; k < V; ++k)
        out.v[k] = j + k < valid ? scale * a.v[k] * (b.v[k] - dot) : 0.0f;
      detail::store<V>(ds, j, out);
    }
  }
}

// Rows of at most kCachedColumns columns (T <= 1024, the common sequence lengths) keep their valid part in registers:
// every lane issues all of its loads at once (memory-level parallelism instead of a loop-carried chain of loads and
// dependent exponentials), the row is read once and written once, and each element takes one exponential. The two-pass
// kernels above serve longer rows. The results follow the same rules: a NaN or +inf score makes the row NaN, a -inf
// score gets 0, columns past the diagonal are written 0.
constexpr unsigned kCachedColumns = 1024;

template <int V>
__global__ void __launch_bounds__(kThreads)
    causal_softmax_forward_cached_kernel(float* scores, std::size_t rows, unsigned T, float scale) {
  constexpr int kChunks = kCachedColumns / (32 * V);
  const unsigned lane = threadIdx.x % 32;
  const std::size_t warps = std::size_t{gridDim.x} * kWarpsPerBlock;
  for (std::size_t r = std::size_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32; r < rows; r += warps) {
    float* x = scores + r * T;
    const unsigned valid = static_cast<unsigned>(r % T) + 1;
    FloatVec<V> f[kChunks];
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const unsigned j = (c * 32 + lane) * V;
      if (j < valid) f[c] = detail::load<V>(x, j);
    }
    float m = -INFINITY;  // `t > m ? t : m` skips NaN (it reaches the sum instead); +inf becomes the maximum
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const unsigned j = (c * 32 + lane) * V + k;
        if (j < valid) {
          f[c].v[k] *= scale;
          m = f[c].v[k] > m ? f[c].v[k] : m;
        }
      }
    const float row_max = warp_max(m);
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const unsigned j = (c * 32 + lane) * V + k;
        if (j < valid) {
          f[c].v[k] = expf(f[c].v[k] - row_max);  // NaN for a NaN score, and for every score when the maximum is +inf
          sum += f[c].v[k];
        }
      }
    const float inv = 1.0f / warp_sum(sum);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const unsigned j = (c * 32 + lane) * V;
      if (j >= T) break;
      FloatVec<V> out;
#pragma unroll
      for (int k = 0; k < V; ++k)
        out.v[k] = j + k < valid ? f[c].v[k] * inv : 0.0f;
      detail::store<V>(x, j, out);
    }
  }
}

template <int V>
__global__ void __launch_bounds__(kThreads)
    causal_softmax_backward_cached_kernel(const float* probs, const float* dprobs, float* dscores, std::size_t rows,
                                          unsigned T, float scale) {
  constexpr int kChunks = kCachedColumns / (32 * V);
  const unsigned lane = threadIdx.x % 32;
  const std::size_t warps = std::size_t{gridDim.x} * kWarpsPerBlock;
  for (std::size_t r = std::size_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32; r < rows; r += warps) {
    const float* p = probs + r * T;
    const float* dp = dprobs + r * T;
    float* ds = dscores + r * T;
    const unsigned valid = static_cast<unsigned>(r % T) + 1;
    FloatVec<V> a[kChunks], b[kChunks];
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const unsigned j = (c * 32 + lane) * V;
      if (j < valid) {
        a[c] = detail::load<V>(p, j);
        b[c] = detail::load<V>(dp, j);
      }
    }
    float dot = 0.0f;
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
#pragma unroll
      for (int k = 0; k < V; ++k)
        if ((c * 32 + lane) * V + k < valid) dot += b[c].v[k] * a[c].v[k];
    dot = warp_sum(dot);
    // ds may alias dp: every lane has read its columns of dp (above) before it writes them.
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const unsigned j = (c * 32 + lane) * V;
      if (j >= T) break;
      FloatVec<V> out;
#pragma unroll
      for (int k = 0; k < V; ++k)
        out.v[k] = j + k < valid ? scale * a[c].v[k] * (b[c].v[k] - dot) : 0.0f;
      detail::store<V>(ds, j, out);
    }
  }
}

// Softmax rows' vector width: 4 when rows are whole 16-byte vectors.
bool rows_vec(std::size_t T, std::initializer_list<const void*> pointers) {
  if (T % kVec != 0) return false;
  for (const void* p : pointers)
    if (!detail::aligned(p, kVec * sizeof(float))) return false;
  return true;
}

int row_blocks(std::size_t rows) {
  const std::size_t needed = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(needed, detail::resident_blocks(kThreads))));
}

}  // namespace

void split_heads(const float* qkv, float* q, float* k, float* v, std::size_t B, std::size_t H, std::size_t T,
                 std::size_t D, void* stream) {
  Permute a{};
  a.packed_in = qkv;
  a.heads_out[0] = q;
  a.heads_out[1] = k;
  a.heads_out[2] = v;
  a.parts = 3;
  launch_permute<true>("split_heads", a, B, H, T, D, stream);
}

void split_heads_backward(const float* dq, const float* dk, const float* dv, float* dqkv, std::size_t B, std::size_t H,
                          std::size_t T, std::size_t D, void* stream) {
  Permute a{};
  a.packed_out = dqkv;
  a.heads_in[0] = dq;
  a.heads_in[1] = dk;
  a.heads_in[2] = dv;
  a.parts = 3;
  launch_permute<false>("split_heads_backward", a, B, H, T, D, stream);
}

void merge_heads(const float* o, float* y, std::size_t B, std::size_t H, std::size_t T, std::size_t D, void* stream) {
  Permute a{};
  a.packed_out = y;
  a.heads_in[0] = o;
  a.parts = 1;
  launch_permute<false>("merge_heads", a, B, H, T, D, stream);
}

void merge_heads_backward(const float* dy, float* d_o, std::size_t B, std::size_t H, std::size_t T, std::size_t D,
                          void* stream) {
  Permute a{};
  a.packed_in = dy;
  a.heads_out[0] = d_o;
  a.parts = 1;
  launch_permute<true>("merge_heads_backward", a, B, H, T, D, stream);
}

void causal_softmax_forward(float* scores, std::size_t blocks, std::size_t T, float scale, void* stream) {
  detail::require_finite_scale("causal_softmax_forward", scale);
  const detail::AttentionDims dims = detail::attention_dims("causal_softmax_forward", blocks, 1, T, 1);
  detail::require_pointer("causal_softmax_forward", scores, dims.score_elems, "scores");
  if (dims.score_elems == 0) return;
  const std::size_t rows = dims.rows;
  auto* s = detail::to_stream(stream);
  const auto t = static_cast<unsigned>(T);
  const bool vec = rows_vec(T, {scores});
  if (T <= kCachedColumns) {
    if (vec)
      causal_softmax_forward_cached_kernel<kVec><<<row_blocks(rows), kThreads, 0, s>>>(scores, rows, t, scale);
    else
      causal_softmax_forward_cached_kernel<1><<<row_blocks(rows), kThreads, 0, s>>>(scores, rows, t, scale);
    TENAX_CUDA_CHECK_LAUNCH(causal_softmax_forward_cached_kernel);
    return;
  }
  if (vec)
    causal_softmax_forward_kernel<kVec><<<row_blocks(rows), kThreads, 0, s>>>(scores, rows, t, scale);
  else
    causal_softmax_forward_kernel<1><<<row_blocks(rows), kThreads, 0, s>>>(scores, rows, t, scale);
  TENAX_CUDA_CHECK_LAUNCH(causal_softmax_forward_kernel);
}

void causal_softmax_backward(const float* probs, const float* dprobs, float* dscores, std::size_t blocks, std::size_t T,
                             float scale, void* stream) {
  detail::require_finite_scale("causal_softmax_backward", scale);
  const detail::AttentionDims dims = detail::attention_dims("causal_softmax_backward", blocks, 1, T, 1);
  for (auto [p, name] : {std::pair<const void*, const char*>{probs, "probs"}, {dprobs, "dprobs"}, {dscores, "dscores"}})
    detail::require_pointer("causal_softmax_backward", p, dims.score_elems, name);
  if (dims.score_elems == 0) return;
  const std::size_t rows = dims.rows;
  auto* s = detail::to_stream(stream);
  const auto t = static_cast<unsigned>(T);
  const bool vec = rows_vec(T, {probs, dprobs, dscores});
  if (T <= kCachedColumns) {
    if (vec)
      causal_softmax_backward_cached_kernel<kVec>
          <<<row_blocks(rows), kThreads, 0, s>>>(probs, dprobs, dscores, rows, t, scale);
    else
      causal_softmax_backward_cached_kernel<1>
          <<<row_blocks(rows), kThreads, 0, s>>>(probs, dprobs, dscores, rows, t, scale);
    TENAX_CUDA_CHECK_LAUNCH(causal_softmax_backward_cached_kernel);
    return;
  }
  if (vec)
    causal_softmax_backward_kernel<kVec><<<row_blocks(rows), kThreads, 0, s>>>(probs, dprobs, dscores, rows, t, scale);
  else
    causal_softmax_backward_kernel<1><<<row_blocks(rows), kThreads, 0, s>>>(probs, dprobs, dscores, rows, t, scale);
  TENAX_CUDA_CHECK_LAUNCH(causal_softmax_backward_kernel);
}

}  // namespace tenax::kernels::cuda
