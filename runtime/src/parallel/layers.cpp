#include "tenax/layers.hpp"

#include <string>

#include "tenax/error.hpp"
#include "tenax/ops.hpp"

namespace tenax {

namespace {
constexpr float kLayerNormEps = 1e-5f;
}

LayerNorm::LayerNorm(std::string name, std::size_t features) : name_(std::move(name)), features_(features) {}

std::vector<ParameterSpec> LayerNorm::parameters() const {
  const auto f = static_cast<std::int64_t>(features_);
  return {{name_ + ".gain", {f}, {0}, {f}, false, ParameterInit::Ones, 0.0f},
          {name_ + ".bias", {f}, {0}, {f}, false, ParameterInit::Zeros, 0.0f}};
}

void LayerNorm::bind(ParameterBuffers& buffers) {
  ctx_ = &buffers.context();
  gain_index_ = buffers.index_of(name_ + ".gain");
  bias_index_ = buffers.index_of(name_ + ".bias");
  gain_ = buffers.weight(gain_index_);
  bias_ = buffers.weight(bias_index_);
  gain_grad_ = buffers.grad(gain_index_);
  bias_grad_ = buffers.grad(bias_index_);
}

std::vector<std::size_t> LayerNorm::parameter_indices() const {
  return {gain_index_, bias_index_};
}

void LayerNorm::forward(const float* x, std::size_t rows, float* y, float* mean, float* rstd) const {
  ops::layernorm_forward(*ctx_, x, gain_, bias_, y, mean, rstd, rows, features_, kLayerNormEps);
}

void LayerNorm::backward(const float* x, const float* mean, const float* rstd, const float* dy, std::size_t rows,
                         float* dx) {
  ops::layernorm_backward(*ctx_, x, gain_, mean, rstd, dy, dx, gain_grad_, bias_grad_, rows, features_);
}

Embedding::Embedding(std::string name, std::size_t vocab, std::size_t features, float init_std)
    : name_(std::move(name)), vocab_(vocab), features_(features), init_std_(init_std) {}

std::vector<ParameterSpec> Embedding::parameters() const {
  const auto v = static_cast<std::int64_t>(vocab_), f = static_cast<std::int64_t>(features_);
  return {{name_ + ".weight", {v, f}, {0, 0}, {v, f}, false, ParameterInit::Normal, init_std_}};
}

void Embedding::bind(ParameterBuffers& buffers) {
  ctx_ = &buffers.context();
  index_ = buffers.index_of(name_ + ".weight");
  table_ = buffers.weight(index_);
  table_grad_ = buffers.grad(index_);
}

void Embedding::forward(const std::int32_t* tokens, std::size_t rows, float* y) const {
  if (ctx_->on_device()) return ops::embedding_forward(*ctx_, tokens, table_, y, rows, features_, vocab_);
  // The host checks here rather than in the kernel so that the message names the layer.
  for (std::size_t r = 0; r < rows; ++r)
    if (tokens[r] < 0 || static_cast<std::size_t>(tokens[r]) >= vocab_)
      throw UsageError(name_ + ": token " + std::to_string(tokens[r]) + " at row " + std::to_string(r) +
                       " is outside the vocabulary [0, " + std::to_string(vocab_) + "); check the data");
  ops::embedding_forward(*ctx_, tokens, table_, y, rows, features_, vocab_);
}

void Embedding::backward(const std::int32_t* tokens, const float* dy, std::size_t rows) {
  ops::embedding_backward(*ctx_, tokens, dy, table_grad_, rows, features_, vocab_);
}

}  // namespace tenax
