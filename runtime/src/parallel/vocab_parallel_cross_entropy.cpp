// Cross-entropy over vocabulary-split logits (Megatron's vocab-parallel cross-entropy): the softmax needs the row
// maximum and the sum of exponentials over the WHOLE vocabulary, and the target's logit lives on one rank only, so
// three per-row quantities are reduced over tp (max, then sum-of-exp and target logit together). Everything else is
// local: the three phases are kernels (tenax/kernels/vocab_parallel_loss.hpp) dispatched on the execution context.
#include <string>
#include <vector>

#include "parallel/collective.hpp"
#include "tenax/error.hpp"
#include "tenax/ops.hpp"
#include "tenax/tensor_parallel.hpp"

namespace tenax {
namespace {

void check_targets(const std::int32_t* targets, std::size_t rows, std::size_t vocab) {
  for (std::size_t r = 0; r < rows; ++r)
    if (targets[r] < 0 || static_cast<std::size_t>(targets[r]) >= vocab)
      throw UsageError("cross-entropy: target " + std::to_string(targets[r]) + " of row " + std::to_string(r) +
                       " is outside the vocabulary [0, " + std::to_string(vocab) + "); check the data");
}

// The phases with row_max (rows floats) and sums (2*rows doubles) in ctx's memory.
void run_phases(ExecutionContext& ctx, Communicator& tp, const float* logits, const std::int32_t* targets,
                float* dlogits, std::size_t rows, std::size_t vocab_local, std::size_t vocab_begin, std::size_t vocab,
                float grad_scale, float* row_max, double* sums, double* loss_sum, std::size_t ld) {
  const bool reduce = tp.size() > 1;
  ops::ce_row_max(ctx, logits, rows, vocab_local, row_max, ld);
  if (reduce) detail::all_reduce_in_context(ctx, tp, row_max, rows, DType::F32, ReduceOp::Max);
  // [sum of exp(logit - max) for r in rows..., target logit for r in rows...], reduced in one call.
  ops::ce_row_sums(ctx, logits, targets, rows, vocab_local, vocab_begin, row_max, sums, ld);
  if (reduce) detail::all_reduce_in_context(ctx, tp, sums, 2 * rows, DType::F64, ReduceOp::Sum);
  ops::ce_finish(ctx, logits, targets, dlogits, rows, vocab_local, vocab_begin, vocab, row_max, sums, grad_scale,
                 loss_sum, ld);
}

}  // namespace

double vocab_parallel_cross_entropy(Communicator& tp, const float* logits, const std::int32_t* targets, float* dlogits,
                                    std::size_t rows, std::size_t vocab_local, std::size_t vocab_begin,
                                    std::size_t vocab, float grad_scale) {
  double loss = 0.0;
  vocab_parallel_cross_entropy(ExecutionContext::host(), tp, logits, targets, dlogits, rows, vocab_local, vocab_begin,
                               vocab, grad_scale, &loss, 0);
  return loss;
}

void vocab_parallel_cross_entropy(ExecutionContext& ctx, Communicator& tp, const float* logits,
                                  const std::int32_t* targets, float* dlogits, std::size_t rows,
                                  std::size_t vocab_local, std::size_t vocab_begin, std::size_t vocab, float grad_scale,
                                  double* loss_sum, std::size_t ld) {
  if (!ctx.on_device()) {
    check_targets(targets, rows, vocab);
    // Local scratch, not the shared host workspace: host callers may run on several threads.
    std::vector<float> row_max(rows);
    std::vector<double> sums(2 * rows);
    run_phases(ctx, tp, logits, targets, dlogits, rows, vocab_local, vocab_begin, vocab, grad_scale, row_max.data(),
               sums.data(), loss_sum, ld);
    return;
  }
  // sums first: doubles want 8-byte alignment, and the workspace start is aligned for anything.
  auto* space = static_cast<unsigned char*>(ctx.workspace(2 * rows * sizeof(double) + rows * sizeof(float)));
  auto* sums = reinterpret_cast<double*>(space);
  auto* row_max = reinterpret_cast<float*>(space + 2 * rows * sizeof(double));
  run_phases(ctx, tp, logits, targets, dlogits, rows, vocab_local, vocab_begin, vocab, grad_scale, row_max, sums,
             loss_sum, ld);
}

}  // namespace tenax
