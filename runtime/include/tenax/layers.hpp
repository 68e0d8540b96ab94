// Layers that tensor parallelism does not split: every tp rank holds the whole parameter and, because their inputs and
// output gradients are identical across tp ranks (the Megatron all-reduce placement guarantees it), computes identical
// gradients, so they need no extra communication. Same declare/bind/forward/backward contract as tensor_parallel.hpp:
// after bind() every pointer argument lives in the memory of the buffers' execution context (host or device), and the
// kernels run on that context (tenax/ops.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tenax/data_parallel.hpp"
#include "tenax/execution.hpp"
#include "tenax/model_state.hpp"

namespace tenax {

// y = (x - mean) * rstd * gain + bias over the last dimension (kernels layernorm_*), eps 1e-5.
class LayerNorm {
 public:
  LayerNorm(std::string name, std::size_t features);
  std::vector<ParameterSpec> parameters() const;  // "<name>.gain" (ones), "<name>.bias" (zeros)
  void bind(ParameterBuffers& buffers);
  std::vector<std::size_t> parameter_indices() const;

  // mean and rstd receive `rows` values each, needed by backward.
  void forward(const float* x, std::size_t rows, float* y, float* mean, float* rstd) const;
  // dx (may alias dy) from the forward input and saved statistics; accumulates the gain and bias gradients.
  void backward(const float* x, const float* mean, const float* rstd, const float* dy, std::size_t rows, float* dx);

 private:
  std::string name_;
  std::size_t features_;
  std::size_t gain_index_ = 0, bias_index_ = 0;
  ExecutionContext* ctx_ = nullptr;
  const float* gain_ = nullptr;
  const float* bias_ = nullptr;
  float* gain_grad_ = nullptr;
  float* bias_grad_ = nullptr;
};

// Token embedding table [vocab, features]: y[r] = table[token[r]].
class Embedding {
 public:
  Embedding(std::string name, std::size_t vocab, std::size_t features, float init_std);
  std::vector<ParameterSpec> parameters() const;  // "<name>.weight"
  void bind(ParameterBuffers& buffers);
  std::vector<std::size_t> parameter_indices() const { return {index_}; }

  // Throws UsageError for a token outside [0, vocab) on the host; on a device such a token's row becomes NaN (a kernel
  // cannot throw), which the loss and the non-finite check then show.
  void forward(const std::int32_t* tokens, std::size_t rows, float* y) const;
  // table_grad[token[r]] += dy[r]: rows in order on the host (deterministic), with atomics on a device.
  void backward(const std::int32_t* tokens, const float* dy, std::size_t rows);

 private:
  std::string name_;
  std::size_t vocab_, features_;
  float init_std_;
  std::size_t index_ = 0;
  ExecutionContext* ctx_ = nullptr;
  const float* table_ = nullptr;
  float* table_grad_ = nullptr;
};

}  // namespace tenax
