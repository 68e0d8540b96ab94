// Reductions used around the optimizer (the global gradient norm for clipping).
#pragma once

#include <cstddef>

#include "tenax/kernels/config.hpp"

namespace tenax::kernels {

namespace cpu {
// sum of x[i]^2 for i < n, accumulated in double in a fixed order (deterministic).
double sum_squares(const float* x, std::size_t n);
}  // namespace cpu

#if TENAX_HAVE_CUDA
namespace cuda {
// *sum_device += sum of x[i]^2 (device pointers, asynchronous on `stream`). Added, not written, so the squares of
// several gradient buffers gather into one device double with no host round trip; zero it once per step. The partial
// sums are combined with atomics, so the last bits may vary from run to run.
void sum_squares(const float* x, std::size_t n, double* sum_device, void* stream);
}  // namespace cuda
#endif

}  // namespace tenax::kernels
