#include "mlp_lm_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "tenax/error.hpp"
#include "tenax/ops.hpp"

namespace tenax::examples {

void ModelConfig::validate(const ParallelLayout& layout) const {
  if (vocab < 2 || hidden < 1 || layers < 1 || seq_len < 1)
    throw UsageError("model: vocab >= 2, hidden >= 1, layers >= 1 and seq-len >= 1 are required");
  const auto tp = static_cast<std::size_t>(layout.tp);
  if (hidden % tp != 0)
    throw UsageError("model: --tp " + std::to_string(tp) + " does not divide the hidden size " +
                     std::to_string(hidden) +
                     "; choose a --tp that divides --hidden, or a --hidden that is a multiple "
                     "of --tp");
  if (vocab % tp != 0)
    throw UsageError("model: --tp " + std::to_string(tp) + " does not divide the vocabulary size " +
                     std::to_string(vocab) +
                     " (the output layer is split by vocabulary); choose --vocab as a "
                     "multiple of --tp");
  if (static_cast<std::size_t>(layout.pp) > layers)
    throw UsageError("model: --pp " + std::to_string(layout.pp) + " is greater than the number of layers " +
                     std::to_string(layers) + " (every pipeline stage needs at least one block); use --pp <= " +
                     std::to_string(layers) + " or more --layers");
}

BlockRange blocks_of_stage(std::size_t layers, int stages, int stage) {
  const auto n = static_cast<std::size_t>(stages), s = static_cast<std::size_t>(stage);
  const std::size_t base = layers / n, extra = layers % n;
  const std::size_t first = s * base + std::min(s, extra);
  return {first, first + base + (s < extra ? 1 : 0)};
}

StageModel::StageModel(const ModelConfig& config, Communicator& tp, int stage, int stages,
                       std::size_t rows_per_micro_batch, int slots, DType activation_dtype, ExecutionContext& context)
    : ctx_(context),
      config_(config),
      tp_(tp),
      stage_(stage),
      stages_(stages),
      rows_(rows_per_micro_batch),
      activation_dtype_(activation_dtype),
      range_(blocks_of_stage(config.layers, stages, stage)) {
  const std::size_t h = config_.hidden, f = config_.ffn();
  const float fc1_std = 1.0f / std::sqrt(static_cast<float>(h));
  // GPT-2's residual scaling: the projections into the residual stream shrink with depth so the stream stays O(1).
  const float fc2_std = 1.0f / std::sqrt(static_cast<float>(f) * 2.0f * static_cast<float>(config_.layers));
  if (is_first()) embedding_ = std::make_unique<Embedding>("embedding", config_.vocab, h, 1.0f);
  for (std::size_t b = range_.first; b < range_.end; ++b) {
    const std::string name = "blocks." + std::to_string(b);
    blocks_.push_back(Block{LayerNorm(name + ".ln", h), ColumnParallelLinear(name + ".fc1", h, f, tp_, true, fc1_std),
                            RowParallelLinear(name + ".fc2", f, h, tp_, fc2_std)});
  }
  if (is_last()) {
    final_ln_ = std::make_unique<LayerNorm>("final_ln", h);
    output_ = std::make_unique<ColumnParallelLinear>("output", h, config_.vocab, tp_, false,
                                                     1.0f / std::sqrt(static_cast<float>(h)));
  }
  const std::size_t f_local = f / static_cast<std::size_t>(tp_.size());
  slots_.resize(static_cast<std::size_t>(slots));
  for (Slot& s : slots_) {
    s.tokens = make(rows_, DType::I32);
    s.blocks.resize(blocks_.size());
    for (BlockActivations& a : s.blocks) {
      a.x = make(rows_ * h);
      a.ln_out = make(rows_ * h);
      a.mean = make(rows_);
      a.rstd = make(rows_);
      a.pre = make(rows_ * f_local);
      a.act = make(rows_ * f_local);
    }
    s.out = make(rows_ * h);
    s.grad = make(rows_ * h);
    if (is_last()) {
      s.targets = make(rows_, DType::I32);
      s.head_ln = make(rows_ * h);
      s.head_mean = make(rows_);
      s.head_rstd = make(rows_);
      s.dlogits = make(rows_ * output_->out_features_local());
    }
  }
  scratch_dact_ = make(rows_ * f_local);
  scratch_dpre_ = make(rows_ * f_local);
  scratch_dln_ = make(rows_ * h);
  if (ctx_.on_device()) loss_sum_ = ctx_.zeros({1}, DType::F64);
}

Tensor StageModel::make(std::size_t n, DType dtype) const {
  return ctx_.zeros({static_cast<std::int64_t>(n)}, dtype);
}

std::vector<ParameterSpec> StageModel::parameters() const {
  std::vector<ParameterSpec> specs;
  auto add = [&](std::vector<ParameterSpec> more) {
    for (auto& s : more)
      specs.push_back(std::move(s));
  };
  if (is_last()) {
    add(output_->parameters());
    add(final_ln_->parameters());
  }
  for (auto b = blocks_.rbegin(); b != blocks_.rend(); ++b) {
    add(b->fc2.parameters());
    add(b->fc1.parameters());
    add(b->ln.parameters());
  }
  if (is_first()) add(embedding_->parameters());
  return specs;
}

void StageModel::bind(ParameterBuffers& buffers) {
  if (&buffers.context() != &ctx_)
    throw std::logic_error("StageModel::bind: the parameter buffers live in " + buffers.context().describe() +
                           " but the stage's activations in " + ctx_.describe());
  if (embedding_) embedding_->bind(buffers);
  for (Block& b : blocks_) {
    b.ln.bind(buffers);
    b.fc1.bind(buffers);
    b.fc2.bind(buffers);
  }
  if (final_ln_) final_ln_->bind(buffers);
  if (output_) output_->bind(buffers);
}

void StageModel::round_activations(float* values, std::size_t n) {
  ops::round_to_dtype(ctx_, values, n, activation_dtype_);
}

void StageModel::mark(ParameterBuffers* buffers, const std::vector<std::size_t>& indices) {
  if (buffers == nullptr) return;
  for (std::size_t i : indices)
    buffers->mark_grad_ready(i);
}

double StageModel::forward(int slot_index, const std::int32_t* tokens, const float* input, const std::int32_t* targets,
                           float grad_scale) {
  Slot& s = slots_.at(static_cast<std::size_t>(slot_index));
  const std::size_t h = config_.hidden;
  const std::size_t n = rows_ * h;
  const std::size_t f_local = blocks_.empty() ? 0 : blocks_[0].fc1.out_features_local();
  // The residual stream enters block 0's slot (or `out` when the stage has no blocks).
  float* stream = blocks_.empty() ? s.out.as<float>() : s.blocks[0].x.as<float>();
  if (is_first()) {
    ctx_.upload(s.tokens.data(), tokens, rows_ * sizeof(std::int32_t));
    embedding_->forward(s.tokens.as<std::int32_t>(), rows_, stream);
  } else {
    ctx_.copy(stream, input, n * sizeof(float));
  }
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    Block& blk = blocks_[b];
    BlockActivations& a = s.blocks[b];
    float* next = b + 1 < blocks_.size() ? s.blocks[b + 1].x.as<float>() : s.out.as<float>();
    blk.ln.forward(a.x.as<float>(), rows_, a.ln_out.as<float>(), a.mean.as<float>(), a.rstd.as<float>());
    blk.fc1.forward(a.ln_out.as<float>(), rows_, a.pre.as<float>());
    ops::bias_gelu_forward(ctx_, a.pre.as<float>(), blk.fc1.bias(), a.act.as<float>(), rows_, f_local);
    blk.fc2.forward(a.act.as<float>(), rows_, next);
    ops::add_inplace(ctx_, next, a.x.as<float>(), n);
    round_activations(next, n);
  }
  if (!is_last()) return 0.0;
  final_ln_->forward(s.out.as<float>(), rows_, s.head_ln.as<float>(), s.head_mean.as<float>(), s.head_rstd.as<float>());
  float* logits = s.dlogits.as<float>();
  output_->forward(s.head_ln.as<float>(), rows_, logits);
  ctx_.upload(s.targets.data(), targets, rows_ * sizeof(std::int32_t));
  const auto* device_targets = s.targets.as<std::int32_t>();
  // The logits are overwritten by their gradient: only the gradient is needed later.
  if (!ctx_.on_device())
    return vocab_parallel_cross_entropy(tp_, logits, device_targets, logits, rows_, output_->out_features_local(),
                                        output_->out_begin(), config_.vocab, grad_scale);
  vocab_parallel_cross_entropy(ctx_, tp_, logits, device_targets, logits, rows_, output_->out_features_local(),
                               output_->out_begin(), config_.vocab, grad_scale, loss_sum_.as<double>());
  return 0.0;
}

double StageModel::take_loss_sum() {
  if (!ctx_.on_device() || !is_last()) return 0.0;
  double total = 0.0;
  ctx_.download(&total, loss_sum_.data(), sizeof total);
  ctx_.zero(loss_sum_.data(), sizeof(double));
  return total;
}

const float* StageModel::output(int slot) const {
  return slots_.at(static_cast<std::size_t>(slot)).out.as<float>();
}

void StageModel::backward(int slot_index, const float* output_grad, ParameterBuffers* ready) {
  Slot& s = slots_.at(static_cast<std::size_t>(slot_index));
  const std::size_t h = config_.hidden;
  const std::size_t n = rows_ * h;
  float* grad = s.grad.as<float>();
  float* dln = scratch_dln_.as<float>();
  if (is_last()) {
    output_->backward(s.head_ln.as<float>(), s.dlogits.as<float>(), rows_, dln);
    mark(ready, output_->parameter_indices());
    final_ln_->backward(s.out.as<float>(), s.head_mean.as<float>(), s.head_rstd.as<float>(), dln, rows_, grad);
    mark(ready, final_ln_->parameter_indices());
  } else {
    ctx_.copy(grad, output_grad, n * sizeof(float));
  }
  round_activations(grad, n);
  for (std::size_t b = blocks_.size(); b-- > 0;) {
    Block& blk = blocks_[b];
    BlockActivations& a = s.blocks[b];
    const std::size_t f_local = blk.fc1.out_features_local();
    blk.fc2.backward(a.act.as<float>(), grad, rows_, scratch_dact_.as<float>());
    mark(ready, blk.fc2.parameter_indices());
    ops::bias_gelu_backward(ctx_, a.pre.as<float>(), blk.fc1.bias(), scratch_dact_.as<float>(),
                            scratch_dpre_.as<float>(), blk.fc1.bias_grad(), rows_, f_local);
    blk.fc1.backward(a.ln_out.as<float>(), scratch_dpre_.as<float>(), rows_, dln);
    mark(ready, blk.fc1.parameter_indices());
    blk.ln.backward(a.x.as<float>(), a.mean.as<float>(), a.rstd.as<float>(), dln, rows_, dln);
    mark(ready, blk.ln.parameter_indices());
    // Residual: the stream's gradient passes straight through and gains the block's input gradient.
    ops::add_inplace(ctx_, grad, dln, n);
    round_activations(grad, n);
  }
  if (is_first()) {
    embedding_->backward(s.tokens.as<std::int32_t>(), grad, rows_);
    mark(ready, embedding_->parameter_indices());
  }
}

const float* StageModel::input_grad(int slot) const {
  return slots_.at(static_cast<std::size_t>(slot)).grad.as<float>();
}

}  // namespace tenax::examples
