// Cross-entropy over vocabulary-split logits (Megatron's vocab-parallel cross-entropy): the softmax needs the row
// maximum and the sum of exponentials over the WHOLE vocabulary, and the target's logit lives on one rank only, so
// three per-row quantities are reduced over tp (max, then sum-of-exp and target logit together). Everything else is
// local.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tenax/error.hpp"
#include "tenax/tensor_parallel.hpp"

namespace tenax {

double vocab_parallel_cross_entropy(Communicator& tp, const float* logits, const std::int32_t* targets, float* dlogits,
                                    std::size_t rows, std::size_t vocab_local, std::size_t vocab_begin,
                                    std::size_t vocab, float grad_scale) {
  for (std::size_t r = 0; r < rows; ++r)
    if (targets[r] < 0 || static_cast<std::size_t>(targets[r]) >= vocab)
      throw UsageError("cross-entropy: target " + std::to_string(targets[r]) + " of row " + std::to_string(r) +
                       " is outside the vocabulary [0, " + std::to_string(vocab) + "); check the data");
  const bool reduce = tp.size() > 1;

  std::vector<float> row_max(rows, -std::numeric_limits<float>::infinity());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < vocab_local; ++c)
      row_max[r] = std::fmax(row_max[r], logits[r * vocab_local + c]);
  if (reduce) tp.all_reduce(row_max.data(), row_max.data(), rows, DType::F32, ReduceOp::Max);

  // [sum of exp(logit - max) for r in rows..., target logit for r in rows...], reduced in one call.
  std::vector<double> sums(2 * rows, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    double s = 0.0;
    for (std::size_t c = 0; c < vocab_local; ++c)
      s += std::exp(static_cast<double>(logits[r * vocab_local + c] - row_max[r]));
    sums[r] = s;
    const auto t = static_cast<std::size_t>(targets[r]);
    if (t >= vocab_begin && t < vocab_begin + vocab_local) sums[rows + r] = logits[r * vocab_local + (t - vocab_begin)];
  }
  if (reduce) tp.all_reduce(sums.data(), sums.data(), 2 * rows, DType::F64, ReduceOp::Sum);

  double loss = 0.0;
  for (std::size_t r = 0; r < rows; ++r)
    loss += std::log(sums[r]) + row_max[r] - sums[rows + r];

  if (dlogits != nullptr) {
    for (std::size_t r = 0; r < rows; ++r) {
      const double inv_sum = 1.0 / sums[r];
      const auto t = static_cast<std::size_t>(targets[r]);
      for (std::size_t c = 0; c < vocab_local; ++c) {
        const std::size_t i = r * vocab_local + c;
        double p = std::exp(static_cast<double>(logits[i] - row_max[r])) * inv_sum;
        if (vocab_begin + c == t) p -= 1.0;
        dlogits[i] = static_cast<float>(p * grad_scale);
      }
    }
  }
  return loss;
}

}  // namespace tenax
