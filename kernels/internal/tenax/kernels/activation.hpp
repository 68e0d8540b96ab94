// Bias + GeLU (tanh approximation, as in GPT-2), forward and backward, on row-major [rows x cols] activations with a
// per-column bias: the epilogue of a linear layer's matrix product.
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
#pragma once

#include <cstddef>

#include "tenax/kernels/config.hpp"

namespace tenax::kernels {

namespace cpu {
// out[r,c] = gelu(in[r,c] + bias[c]). out may alias in.
void bias_gelu_forward(const float* in, const float* bias, float* out, std::size_t rows, std::size_t cols);
// in is the pre-activation before the bias (what the forward pass read). din[r,c] = dout[r,c] * gelu'(in[r,c] +
// bias[c]) and dbias[c] += sum over r of din[r,c] (accumulated, so micro-batches add up; zero it before the first one).
// din may alias dout.
void bias_gelu_backward(const float* in, const float* bias, const float* dout, float* din, float* dbias,
                        std::size_t rows, std::size_t cols);
}  // namespace cpu

#if TENAX_HAVE_CUDA
namespace cuda {
// As the cpu:: versions on device pointers; asynchronous on `stream`. The dbias sums are added with atomics, so their
// rounding may differ from run to run in the last bits.
void bias_gelu_forward(const float* in, const float* bias, float* out, std::size_t rows, std::size_t cols,
                       void* stream);
void bias_gelu_backward(const float* in, const float* bias, const float* dout, float* din, float* dbias,
                        std::size_t rows, std::size_t cols, void* stream);
}  // namespace cuda
#endif

}  // namespace tenax::kernels
