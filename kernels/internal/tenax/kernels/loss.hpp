// Softmax cross-entropy over a row-major [rows x vocab] block of logits, fused with its gradient.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tenax/kernels/config.hpp"

namespace tenax::kernels {

namespace cpu {
// Returns the SUM over rows of -log softmax(logits[r])[targets[r]] (double, so callers average over micro-batches and
// ranks themselves). If dlogits is not null it receives (softmax(logits[r]) - onehot(targets[r])) * grad_scale / rows;
// grad_scale folds in the loss scale and the micro-batch averaging. dlogits may alias logits. A target outside
// [0, vocab) throws UsageError naming the row.
double softmax_cross_entropy(const float* logits, const std::int32_t* targets, float* dlogits, std::size_t rows,
                             std::size_t vocab, float grad_scale);
}  // namespace cpu

#if TENAX_HAVE_CUDA
namespace cuda {
// As cpu::softmax_cross_entropy on device pointers, asynchronous on `stream`; the loss sum is written (not added) to
// the device double *loss_sum_device. A device cannot throw: a target outside [0, vocab) makes the loss sum NaN (and
// its gradient row NaN), which the non-finite check then catches.
void softmax_cross_entropy(const float* logits, const std::int32_t* targets, float* dlogits, std::size_t rows,
                           std::size_t vocab, float grad_scale, double* loss_sum_device, void* stream);
}  // namespace cuda
#endif

}  // namespace tenax::kernels
