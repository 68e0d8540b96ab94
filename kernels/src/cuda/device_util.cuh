// Device-side building blocks shared by the CUDA kernel files: vector loads/stores and block reductions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tenax::kernels::detail {

// V consecutive floats (or 16-bit values) moved as one aligned access: V = 4 gives 16-byte float loads, the widest a
// thread can issue, which is what memory-bound kernels need to reach full bandwidth.
template <int V>
struct alignas(4 * V) FloatVec {
  float v[V];
};
template <int V>
struct alignas(2 * V) HalfVec {
  std::uint16_t v[V];
};

template <int V>
__device__ inline FloatVec<V> load(const float* p, std::size_t e) {
  return *reinterpret_cast<const FloatVec<V>*>(p + e);
}
template <int V>
__device__ inline void store(float* p, std::size_t e, const FloatVec<V>& x) {
  *reinterpret_cast<FloatVec<V>*>(p + e) = x;
}
template <int V>
__device__ inline HalfVec<V> load(const std::uint16_t* p, std::size_t e) {
  return *reinterpret_cast<const HalfVec<V>*>(p + e);
}
template <int V>
__device__ inline void store(std::uint16_t* p, std::size_t e, const HalfVec<V>& x) {
  *reinterpret_cast<HalfVec<V>*>(p + e) = x;
}

__device__ inline std::size_t global_thread() {
  return std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
}
__device__ inline std::size_t grid_threads() {
  return std::size_t{gridDim.x} * blockDim.x;
}

// Reduces one value per thread over the whole block with `combine` (warp shuffles, then one warp over the per-warp
// results); every thread gets the result. `identity` fills the lanes beyond the block's warp count. The leading
// barrier makes back-to-back calls (which reuse the shared slots) safe.
template <class T, class Combine>
__device__ inline T block_reduce(T value, Combine combine, T identity) {
  __shared__ T per_warp[32];
  for (int offset = 16; offset > 0; offset >>= 1)
    value = combine(value, __shfl_xor_sync(0xFFFFFFFFu, value, offset));
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = (blockDim.x + 31) / 32;
  __syncthreads();
  if (lane == 0) per_warp[warp] = value;
  __syncthreads();
  value = lane < warps ? per_warp[lane] : identity;
  for (int offset = 16; offset > 0; offset >>= 1)
    value = combine(value, __shfl_xor_sync(0xFFFFFFFFu, value, offset));
  return value;
}

struct Sum {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

}  // namespace tenax::kernels::detail
