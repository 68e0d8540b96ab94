// The output head: projection onto the vocabulary split over tensor parallelism, and the vocabulary-parallel softmax
// cross-entropy.
#include <vector>

#include "tenax/error.hpp"
#include "tenax/nn.hpp"
#include "tenax/tensor_parallel.hpp"

namespace tenax::nn {

VocabParallelLoss::VocabParallelLoss(std::string name, std::size_t hidden, std::size_t vocab, Communicator& tp,
                                     float init_std, std::string weight_name)
    : Module(name),
      hidden_(hidden),
      vocab_(vocab),
      tp_(tp),
      proj_(std::make_unique<tenax::ColumnParallelLinear>(name, hidden, vocab, tp, false, init_std,
                                                          std::move(weight_name))) {}
VocabParallelLoss::~VocabParallelLoss() = default;

std::size_t VocabParallelLoss::ld() const {
  return padded_row_stride(proj_->out_features_local());
}

std::vector<ParameterSpec> VocabParallelLoss::parameters() const {
  return proj_->parameters();
}
void VocabParallelLoss::bind(ParameterBuffers& buffers) {
  proj_->bind(buffers);
}

TensorSpec VocabParallelLoss::prepare(const TensorSpec& input, const Geometry& geometry, int slots,
                                      ExecutionContext& context) {
  const auto rows = static_cast<std::int64_t>(geometry.rows());
  in_ = {{rows, static_cast<std::int64_t>(hidden_)}, DType::F32};
  if (!(input == in_)) throw UsageError(name() + ": takes " + to_string(in_) + " but is given " + to_string(input));
  // Rows padded to an aligned stride for the 16-bit products (padded_row_stride); the padding columns stay zero:
  // nothing writes them.
  dlogits_ = per_slot(context, slots, {rows, static_cast<std::int64_t>(ld())});
  return {{0}, DType::F32};
}

void VocabParallelLoss::forward(StepState& step, int slot, const Tensor& input, const Tensor&) {
  check_tensor(input, in_, step.ctx(), "the input");
  const std::size_t rows = step.geometry.rows();
  float* logits = dlogits_.at(slot).as<float>();
  proj_->forward(input.as<float>(), rows, logits, ld());
  if (step.logits_only) return gather_logits(step, logits);
  const Tensor& targets = step.targets.at(static_cast<std::size_t>(slot));
  check_tensor(targets, {{static_cast<std::int64_t>(rows)}, DType::I32}, step.ctx(), "the targets");
  // The logits are overwritten by their gradient: only the gradient is needed later.
  vocab_parallel_cross_entropy(step.ctx(), tp_, logits, targets.as<std::int32_t>(), logits, rows,
                               proj_->out_features_local(), proj_->out_begin(), vocab_, step.grad_scale, step.loss_sum,
                               ld());
}

void VocabParallelLoss::backward(StepState& step, int slot, const Tensor& input, const Tensor&, const Tensor&,
                                 const Tensor& input_grad) {
  check_tensor(input, in_, step.ctx(), "the input");
  if (input_grad.numel() > 0) check_tensor(input_grad, in_, step.ctx(), "the input gradient");
  proj_->backward(input.as<float>(), dlogits_.at(slot).as<float>(), step.geometry.rows(),
                  input_grad.numel() > 0 ? input_grad.as<float>() : nullptr, ld());
}

// Inference: every tp rank receives the whole [rows, vocab] logits in host order (the tp ranks' column blocks side by
// side). Not a training path: the logits go through host memory.
void VocabParallelLoss::gather_logits(StepState& step, const float* local) const {
  const std::size_t rows = step.geometry.rows(), vl = proj_->out_features_local(), ld = this->ld();
  if (step.logits.numel() == 0)
    step.logits = Tensor::zeros({static_cast<std::int64_t>(rows), static_cast<std::int64_t>(vocab_)}, DType::F32);
  const Tensor& out = step.logits;
  check_tensor(out, {{static_cast<std::int64_t>(rows), static_cast<std::int64_t>(vocab_)}, DType::F32},
               ExecutionContext::host(), "the logits buffer");
  std::vector<float> all(static_cast<std::size_t>(tp_.size()) * rows * ld);
  if (step.ctx().on_device()) {
    // The tp communicator of a device run is an NCCL one: gather in device memory, then read the result back.
    Tensor gathered = step.ctx().empty({static_cast<std::int64_t>(all.size())}, DType::F32);
    step.ctx().before_communication(tp_);
    tp_.all_gather(local, gathered.data(), rows * ld, DType::F32);
    step.ctx().after_communication(tp_);
    step.ctx().download(all.data(), gathered.data(), all.size() * sizeof(float));
  } else {
    tp_.all_gather(local, all.data(), rows * ld, DType::F32);
  }
  for (std::size_t t = 0; t < static_cast<std::size_t>(tp_.size()); ++t)
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < vl; ++c)
        out.as<float>()[r * vocab_ + t * vl + c] = all[(t * rows + r) * ld + c];
}

}  // namespace tenax::nn
