// Column sums of per-element quantities over the rows of a row-major [rows x cols] block (bias and layer-norm
// parameter gradients), shared by the CUDA kernel files.
#pragma once

#include <algorithm>
#include <cstddef>

#include "cuda/check.hpp"
#include "cuda/device_util.cuh"
#include "cuda/launch.hpp"

namespace tenax::kernels::detail {

constexpr int kColX = 32;  // column kernels: a warp spans 32 x V consecutive columns of one row...
constexpr int kColY = 8;   // ...and 8 warps take 8 rows at a time
constexpr int kColThreads = kColX * kColY;
constexpr int kColVec = 4;

// Column sums over all rows of K per-element quantities (elem.apply adds its contributions for V columns of one row,
// and may write per-element outputs on the way). Threads reduce their rows in registers, the block reduces its 8 rows
// of partials in shared memory, and one atomicAdd per column and block publishes the result.
template <int V, int K, class Elem>
__global__ void __launch_bounds__(kColThreads)
    column_sum_kernel(std::size_t rows, std::size_t cols, Elem elem, float* out0, float* out1) {
  const std::size_t c = (std::size_t{blockIdx.x} * kColX + threadIdx.x) * V;
  float acc[K][V] = {};
  if (c < cols) {
    for (std::size_t r = std::size_t{blockIdx.y} * kColY + threadIdx.y; r < rows; r += std::size_t{gridDim.y} * kColY)
      elem.template apply<V>(r, c, acc);
  }
  __shared__ float partial[K][kColY][kColX * V];
  for (int q = 0; q < K; ++q)
    for (int j = 0; j < V; ++j)
      partial[q][threadIdx.y][threadIdx.x * V + j] = acc[q][j];
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
  for (int q = 0; q < K; ++q) {
    float* out = q == 0 ? out0 : out1;
    for (int j = 0; j < V; ++j) {
      float s = 0.0f;
      for (int y = 0; y < kColY; ++y)
        s += partial[q][y][threadIdx.x * V + j];
      atomicAdd(out + c + j, s);
    }
  }
}

template <int K, class Elem>
void launch_column_sum(std::size_t rows, std::size_t cols, bool vectorise, const Elem& elem, float* out0, float* out1,
                       void* stream) {
  if (rows == 0 || cols == 0) return;
  const int V = vectorise ? kColVec : 1;
  const std::size_t col_blocks = (cols / V + kColX - 1) / kColX;
  const std::size_t row_groups = (rows + kColY - 1) / kColY;
  // Enough row blocks to fill the device once, no more: each extra one only adds atomics.
  const std::size_t wanted = std::max<std::size_t>(1, resident_blocks(kColThreads) / col_blocks);
  const dim3 grid(static_cast<unsigned>(col_blocks),
                  static_cast<unsigned>(std::min({row_groups, wanted, std::size_t{65535}})));
  const dim3 block(kColX, kColY);
  if (vectorise)
    column_sum_kernel<kColVec, K><<<grid, block, 0, to_stream(stream)>>>(rows, cols, elem, out0, out1);
  else
    column_sum_kernel<1, K><<<grid, block, 0, to_stream(stream)>>>(rows, cols, elem, out0, out1);
  TENAX_CUDA_CHECK_LAUNCH(column_sum_kernel);
}

}  // namespace tenax::kernels::detail
