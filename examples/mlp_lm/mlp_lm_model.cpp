#include "mlp_lm_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "tenax/error.hpp"
#include "tenax/kernels/activation.hpp"
#include "tenax/precision.hpp"

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
                       std::size_t rows_per_micro_batch, int slots, DType activation_dtype)
    : config_(config),
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
    s.tokens.resize(rows_);
    s.blocks.resize(blocks_.size());
    for (BlockActivations& a : s.blocks) {
      a.x.resize(rows_ * h);
      a.ln_out.resize(rows_ * h);
      a.mean.resize(rows_);
      a.rstd.resize(rows_);
      a.pre.resize(rows_ * f_local);
      a.act.resize(rows_ * f_local);
    }
    s.out.resize(rows_ * h);
    s.grad.resize(rows_ * h);
    if (is_last()) {
      s.head_ln.resize(rows_ * h);
      s.head_mean.resize(rows_);
      s.head_rstd.resize(rows_);
      s.dlogits.resize(rows_ * output_->out_features_local());
    }
  }
  scratch_dact_.resize(rows_ * f_local);
  scratch_dpre_.resize(rows_ * f_local);
  scratch_dln_.resize(rows_ * h);
  round_scratch_.resize(rows_ * h);
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
  round_to_dtype(values, n, activation_dtype_, round_scratch_.data());
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
  float* stream = blocks_.empty() ? s.out.data() : s.blocks[0].x.data();
  if (is_first()) {
    std::memcpy(s.tokens.data(), tokens, rows_ * sizeof(std::int32_t));
    embedding_->forward(tokens, rows_, stream);
  } else {
    std::memcpy(stream, input, n * sizeof(float));
  }
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    Block& blk = blocks_[b];
    BlockActivations& a = s.blocks[b];
    float* next = b + 1 < blocks_.size() ? s.blocks[b + 1].x.data() : s.out.data();
    blk.ln.forward(a.x.data(), rows_, a.ln_out.data(), a.mean.data(), a.rstd.data());
    blk.fc1.forward(a.ln_out.data(), rows_, a.pre.data());
    kernels::cpu::bias_gelu_forward(a.pre.data(), blk.fc1.bias(), a.act.data(), rows_, f_local);
    blk.fc2.forward(a.act.data(), rows_, next);
    for (std::size_t i = 0; i < n; ++i)
      next[i] += a.x[i];
    round_activations(next, n);
  }
  if (!is_last()) return 0.0;
  final_ln_->forward(s.out.data(), rows_, s.head_ln.data(), s.head_mean.data(), s.head_rstd.data());
  output_->forward(s.head_ln.data(), rows_, s.dlogits.data());
  // The logits are overwritten by their gradient: only the gradient is needed later.
  return vocab_parallel_cross_entropy(tp_, s.dlogits.data(), targets, s.dlogits.data(), rows_,
                                      output_->out_features_local(), output_->out_begin(), config_.vocab, grad_scale);
}

const float* StageModel::output(int slot) const {
  return slots_.at(static_cast<std::size_t>(slot)).out.data();
}

void StageModel::backward(int slot_index, const float* output_grad, ParameterBuffers* ready) {
  Slot& s = slots_.at(static_cast<std::size_t>(slot_index));
  const std::size_t h = config_.hidden;
  const std::size_t n = rows_ * h;
  float* grad = s.grad.data();
  if (is_last()) {
    output_->backward(s.head_ln.data(), s.dlogits.data(), rows_, scratch_dln_.data());
    mark(ready, output_->parameter_indices());
    final_ln_->backward(s.out.data(), s.head_mean.data(), s.head_rstd.data(), scratch_dln_.data(), rows_, grad);
    mark(ready, final_ln_->parameter_indices());
  } else {
    std::memcpy(grad, output_grad, n * sizeof(float));
  }
  round_activations(grad, n);
  for (std::size_t b = blocks_.size(); b-- > 0;) {
    Block& blk = blocks_[b];
    BlockActivations& a = s.blocks[b];
    const std::size_t f_local = blk.fc1.out_features_local();
    blk.fc2.backward(a.act.data(), grad, rows_, scratch_dact_.data());
    mark(ready, blk.fc2.parameter_indices());
    kernels::cpu::bias_gelu_backward(a.pre.data(), blk.fc1.bias(), scratch_dact_.data(), scratch_dpre_.data(),
                                     blk.fc1.bias_grad(), rows_, f_local);
    blk.fc1.backward(a.ln_out.data(), scratch_dpre_.data(), rows_, scratch_dln_.data());
    mark(ready, blk.fc1.parameter_indices());
    blk.ln.backward(a.x.data(), a.mean.data(), a.rstd.data(), scratch_dln_.data(), rows_, scratch_dln_.data());
    mark(ready, blk.ln.parameter_indices());
    // Residual: the stream's gradient passes straight through and gains the block's input gradient.
    for (std::size_t i = 0; i < n; ++i)
      grad[i] += scratch_dln_[i];
    round_activations(grad, n);
  }
  if (is_first()) {
    embedding_->backward(s.tokens.data(), grad, rows_);
    mark(ready, embedding_->parameter_indices());
  }
}

const float* StageModel::input_grad(int slot) const {
  return slots_.at(static_cast<std::size_t>(slot)).grad.data();
}

}  // namespace tenax::examples
