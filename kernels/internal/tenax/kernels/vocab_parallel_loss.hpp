// The three local phases of the vocabulary-parallel softmax cross-entropy (Megatron's): each tensor-parallel rank holds
// the columns [vocab_begin, vocab_begin + vocab_local) of the row-major [rows x vocab] logits, and the caller reduces
// over the tensor-parallel group between the phases:
//
//   ce_row_max    row_max[r] = max over local columns                       -> all-reduce (max) of row_max
//   ce_row_sums   sums[r] = sum of exp(logit - row_max[r]) over local columns,
//                 sums[rows + r] = the target's logit if this rank holds it, else 0 -> all-reduce (sum, f64) of sums
//   ce_finish     the loss sum over rows (log sums[r] + row_max[r] - target logit) and, if dlogits is not null,
//                 dlogits = (softmax - onehot(target)) * grad_scale for the local columns (dlogits may alias logits).
// targets are global token ids. With one rank the phases are an ordinary softmax cross-entropy.
// ld is the row stride of logits and dlogits in elements (0: vocab_local): the output head pads it to keep the rows
// aligned for the matrix products that write the logits and read their gradient (padded_row_stride,
// tenax/tensor_parallel.hpp); the columns past vocab_local are neither read nor written.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tenax/kernels/config.hpp"

namespace tenax::kernels {

namespace cpu {
// The phases as described above; exponentials in double, rows and columns in order (deterministic). Targets are
// checked by the caller (the runtime throws UsageError naming the row before phase one).
void ce_row_max(const float* logits, std::size_t rows, std::size_t vocab_local, float* row_max, std::size_t ld = 0);
void ce_row_sums(const float* logits, const std::int32_t* targets, std::size_t rows, std::size_t vocab_local,
                 std::size_t vocab_begin, const float* row_max, double* sums, std::size_t ld = 0);
// Returns the loss summed over rows.
double ce_finish(const float* logits, const std::int32_t* targets, float* dlogits, std::size_t rows,
                 std::size_t vocab_local, std::size_t vocab_begin, const float* row_max, const double* sums,
                 float grad_scale, std::size_t ld = 0);
}  // namespace cpu

#if TENAX_HAVE_CUDA
namespace cuda {
// As the cpu:: versions on device pointers, asynchronous on `stream`. row_max, sums and loss_sum are device memory;
// ce_finish ADDS the loss sum to the device double *loss_sum (so micro-batches gather into one value that is read back
// once per step). A target outside [0, vocab) makes its row's loss and gradient NaN (a device cannot throw).
void ce_row_max(const float* logits, std::size_t rows, std::size_t vocab_local, float* row_max, void* stream,
                std::size_t ld = 0);
void ce_row_sums(const float* logits, const std::int32_t* targets, std::size_t rows, std::size_t vocab_local,
                 std::size_t vocab_begin, const float* row_max, double* sums, void* stream, std::size_t ld = 0);
void ce_finish(const float* logits, const std::int32_t* targets, float* dlogits, std::size_t rows,
               std::size_t vocab_local, std::size_t vocab_begin, std::size_t vocab, const float* row_max,
               const double* sums, float grad_scale, double* loss_sum, void* stream, std::size_t ld = 0);
}  // namespace cuda
#endif

}  // namespace tenax::kernels
