// Token embedding lookup and its gradient on a row-major [vocab x features] table.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tenax/kernels/config.hpp"

namespace tenax::kernels {

namespace cpu {
// y[r] = table[tokens[r]] (rows of `features` floats). A token outside [0, vocab) throws UsageError naming the row.
void embedding_forward(const std::int32_t* tokens, const float* table, float* y, std::size_t rows, std::size_t features,
                       std::size_t vocab);
// table_grad[tokens[r]] += dy[r] for every row, rows in order (deterministic). Tokens are not checked again: the
// forward pass already did.
void embedding_backward(const std::int32_t* tokens, const float* dy, float* table_grad, std::size_t rows,
                        std::size_t features);

// The vocabulary-parallel lookup: this rank holds rows [vocab_begin, vocab_begin + vocab_local) of a
// [vocab x features] table (`table` is its first row). y[r] = the token's row when this rank holds it, else zeros, so
// that the tensor-parallel sum of every rank's y is the whole lookup. A token outside [0, vocab) throws UsageError
// naming the row (every rank sees the same tokens and throws alike).
void embedding_slice_forward(const std::int32_t* tokens, const float* table, float* y, std::size_t rows,
                             std::size_t features, std::size_t vocab, std::size_t vocab_begin, std::size_t vocab_local);
// table_grad[tokens[r] - vocab_begin] += dy[r] for the rows whose token this rank holds, rows in order.
void embedding_slice_backward(const std::int32_t* tokens, const float* dy, float* table_grad, std::size_t rows,
                              std::size_t features, std::size_t vocab_begin, std::size_t vocab_local);
}  // namespace cpu

#if TENAX_HAVE_CUDA
namespace cuda {
// As the cpu:: versions on device pointers, asynchronous on `stream`. A device cannot throw: a token outside
// [0, vocab) fills its output row with NaN (the loss then becomes NaN, which the non-finite check reports), and the
// backward pass skips it. The gradient rows are added with atomics (a token repeated in the batch adds in any order).
void embedding_forward(const std::int32_t* tokens, const float* table, float* y, std::size_t rows, std::size_t features,
                       std::size_t vocab, void* stream);
void embedding_backward(const std::int32_t* tokens, const float* dy, float* table_grad, std::size_t rows,
                        std::size_t features, std::size_t vocab, void* stream);
// The slice versions: a token outside [0, vocab) makes its row NaN on every rank (so the sum is NaN too); tokens this
// rank does not hold give zeros and add nothing.
void embedding_slice_forward(const std::int32_t* tokens, const float* table, float* y, std::size_t rows,
                             std::size_t features, std::size_t vocab, std::size_t vocab_begin, std::size_t vocab_local,
                             void* stream);
void embedding_slice_backward(const std::int32_t* tokens, const float* dy, float* table_grad, std::size_t rows,
                              std::size_t features, std::size_t vocab_begin, std::size_t vocab_local, void* stream);
}  // namespace cuda
#endif

}  // namespace tenax::kernels
