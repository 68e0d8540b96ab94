// The grid-stride element-wise loop shared by the CUDA kernel files: an operation object says what to do with V
// consecutive elements, this file walks the array with V = 4 (16-byte accesses) when the pointers allow it.
#pragma once

#include <cstddef>

#include "cuda/check.hpp"
#include "cuda/device_util.cuh"
#include "cuda/launch.hpp"

namespace tenax::kernels::detail {

constexpr int kThreads = 256;
constexpr int kVec = 4;

// Applies op.apply<V>(e) to every V-element group starting at element e, then the scalar tail (fewer than V elements,
// one per thread), then op.finish() once per thread (for per-thread results such as the non-finite flag).
template <int V, class Op>
__global__ void __launch_bounds__(kThreads) elementwise_kernel(std::size_t n, Op op_in) {
  Op op = op_in;
  const std::size_t groups = n / V;
  for (std::size_t g = global_thread(); g < groups; g += grid_threads())
    op.template apply<V>(g * V);
  const std::size_t tail = global_thread() + groups * V;
  if (tail < n) op.template apply<1>(tail);
  op.finish();
}

template <class Op>
void launch_elementwise(std::size_t n, bool vectorise, const Op& op, void* stream) {
  if (n == 0) return;
  const int blocks = grid_blocks(vectorise ? n / kVec : n, kThreads);
  if (vectorise)
    elementwise_kernel<kVec><<<blocks, kThreads, 0, to_stream(stream)>>>(n, op);
  else
    elementwise_kernel<1><<<blocks, kThreads, 0, to_stream(stream)>>>(n, op);
  TENAX_CUDA_CHECK_LAUNCH(elementwise_kernel);
}

}  // namespace tenax::kernels::detail
