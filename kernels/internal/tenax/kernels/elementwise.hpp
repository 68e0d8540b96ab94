// The small element-wise pieces of a transformer-style layer that are not fused into a bigger kernel: the residual
// addition and a linear layer's bias (added after a row-parallel product's all-reduce, and its gradient).
#pragma once

#include <cstddef>

#include "tenax/kernels/config.hpp"

namespace tenax::kernels {

namespace cpu {
// y[i] += x[i] for i < n (the residual connection). x may equal y.
void add_inplace(float* y, const float* x, std::size_t n);
// y[r,c] += bias[c] on a row-major [rows x cols] block.
void bias_add(float* y, const float* bias, std::size_t rows, std::size_t cols);
// dbias[c] += dy[r,c] for every row r, rows in order (fp32 accumulation directly into dbias; deterministic).
void bias_grad(const float* dy, float* dbias, std::size_t rows, std::size_t cols);
}  // namespace cpu

#if TENAX_HAVE_CUDA
namespace cuda {
// As the cpu:: versions on device pointers, asynchronous on `stream`. bias_grad adds its column sums with atomics, so
// the last bits may vary from run to run.
void add_inplace(float* y, const float* x, std::size_t n, void* stream);
void bias_add(float* y, const float* bias, std::size_t rows, std::size_t cols, void* stream);
void bias_grad(const float* dy, float* dbias, std::size_t rows, std::size_t cols, void* stream);
}  // namespace cuda
#endif

}  // namespace tenax::kernels
