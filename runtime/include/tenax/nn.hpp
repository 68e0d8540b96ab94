// The library's modules (tenax/module.hpp): what a GPT-class decoder is made of, each with its backward pass, tensor
// parallelism inside where it applies (Megatron placement: a column-parallel layer feeds a row-parallel one, one
// all-reduce in each direction), on the host or a CUDA device alike (every kernel through tenax/ops.hpp).
//
// Shapes (rows = tokens of a micro-batch; tp = the tensor-parallel group's size):
//   Embedding             I32 [rows]              -> F32 [rows, features]   (the table is replicated over tp)
//   VocabParallelEmbedding I32 [rows]             -> F32 [rows, features]   (vocab / tp rows of the table per rank,
//                                                    all-reduce over tp)
//   PositionalEmbedding   F32 [rows, features]    -> same, plus a learned [seq_len, features] table per sequence
//   LayerNorm             F32 [rows, features]    -> same
//   Linear                F32 [rows, in]          -> F32 [rows, out]        (replicated over tp)
//   ColumnParallelLinear  F32 [rows, in]          -> F32 [rows, out / tp]
//   RowParallelLinear     F32 [rows, in / tp]     -> F32 [rows, out]        (all-reduce over tp)
//   GeluMlp               F32 [rows, hidden]      -> same: column fc1 (hidden -> ffn), GeLU, row fc2 (ffn -> hidden)
//   CausalSelfAttention   F32 [rows, hidden]      -> same: column-parallel QKV split by heads over tp, the causal
//                                                    attention core per head, row-parallel output projection
//   VocabParallelLoss     F32 [rows, hidden]      -> nothing: projection onto the vocabulary split over tp and
//                                                    softmax cross-entropy against the step's targets; the summed
//                                                    token loss is added to StepState::loss_sum
//
// Initialisation: weights are N(0, init_std^2) and biases zero, as a function of (seed, name, global index) only, so
// every layout starts from the same global weights (ParameterBuffers::initialize).
//
// Tied weights: two modules that declare a parameter with the same name and the same ParameterSpec share it, e.g. a
// VocabParallelEmbedding and a VocabParallelLoss given the embedding's weight name (GPT's tied input and output
// embeddings). The engine keeps one copy per rank that uses it, adds every use's gradient, and when the users sit on
// different pipeline stages sums the copies' gradients each step, so the copies stay equal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tenax/communicator.hpp"
#include "tenax/module.hpp"

namespace tenax {
class ColumnParallelLinear;
class RowParallelLinear;
class LayerNorm;
class Embedding;
}  // namespace tenax

namespace tenax::nn {

class Embedding : public Module {
 public:
  Embedding(std::string name, std::size_t vocab, std::size_t features, float init_std);
  ~Embedding() override;
  std::vector<ParameterSpec> parameters() const override;
  void bind(ParameterBuffers& buffers) override;
  TensorSpec prepare(const TensorSpec& input, const Geometry& geometry, int slots, ExecutionContext& context) override;
  void forward(StepState& step, int slot, const Tensor& input, const Tensor& output) override;
  void backward(StepState& step, int slot, const Tensor& input, const Tensor& output, const Tensor& output_grad,
                const Tensor& input_grad) override;

 private:
  std::size_t vocab_, features_;
  std::unique_ptr<tenax::Embedding> layer_;
  TensorSpec in_, out_;
};

// Megatron's vocabulary-parallel embedding: tensor-parallel rank r holds rows [r * vocab / tp, (r + 1) * vocab / tp)
// of the table (parameter "<name>.weight", split like VocabParallelLoss's projection, so the two can be tied); each
// rank looks up the tokens it holds, zeros for the others, and an all-reduce over tp completes the lookup. Backward
// adds each rank's rows' gradients locally (no communication). With tp = 1 it is Embedding. Throws UsageError when tp
// does not divide the vocabulary.
class VocabParallelEmbedding : public Module {
 public:
  VocabParallelEmbedding(std::string name, std::size_t vocab, std::size_t features, Communicator& tp, float init_std);
  std::vector<ParameterSpec> parameters() const override;
  void bind(ParameterBuffers& buffers) override;
  TensorSpec prepare(const TensorSpec& input, const Geometry& geometry, int slots, ExecutionContext& context) override;
  void forward(StepState& step, int slot, const Tensor& input, const Tensor& output) override;
  void backward(StepState& step, int slot, const Tensor& input, const Tensor& output, const Tensor& output_grad,
                const Tensor& input_grad) override;

 private:
  std::size_t vocab_, features_, local_, begin_;
  Communicator& tp_;
  float init_std_;
  const float* table_ = nullptr;
  float* table_grad_ = nullptr;
  TensorSpec in_, out_;
};

class PositionalEmbedding : public Module {
 public:
  PositionalEmbedding(std::string name, std::size_t max_positions, std::size_t features, float init_std);
  std::vector<ParameterSpec> parameters() const override;
  void bind(ParameterBuffers& buffers) override;
  TensorSpec prepare(const TensorSpec& input, const Geometry& geometry, int slots, ExecutionContext& context) override;
  void forward(StepState& step, int slot, const Tensor& input, const Tensor& output) override;
  void backward(StepState& step, int slot, const Tensor& input, const Tensor& output, const Tensor& output_grad,
                const Tensor& input_grad) override;

 private:
  std::size_t max_positions_, features_;
  float init_std_;
  const float* table_ = nullptr;
  float* table_grad_ = nullptr;
  TensorSpec spec_;
};

class LayerNorm : public Module {
 public:
  LayerNorm(std::string name, std::size_t features);
  ~LayerNorm() override;
  std::vector<ParameterSpec> parameters() const override;
  void bind(ParameterBuffers& buffers) override;
  TensorSpec prepare(const TensorSpec& input, const Geometry& geometry, int slots, ExecutionContext& context) override;
  void forward(StepState& step, int slot, const Tensor& input, const Tensor& output) override;
  void backward(StepState& step, int slot, const Tensor& input, const Tensor& output, const Tensor& output_grad,
                const Tensor& input_grad) override;

 private:
  std::size_t features_;
  std::unique_ptr<tenax::LayerNorm> layer_;
  std::vector<Tensor> mean_, rstd_;  // per slot
  Tensor scratch_;                   // dx when the caller wants no input gradient
  TensorSpec spec_;
};

class Linear : public Module {
 public:
  Linear(std::string name, std::size_t in_features, std::size_t out_features, bool with_bias, float init_std);
  std::vector<ParameterSpec> parameters() const override;
  void bind(ParameterBuffers& buffers) override;
  TensorSpec prepare(const TensorSpec& input, const Geometry& geometry, int slots, ExecutionContext& context) override;
  void forward(StepState& step, int slot, const Tensor& input, const Tensor& output) override;
  void backward(StepState& step, int slot, const Tensor& input, const Tensor& output, const Tensor& output_grad,
                const Tensor& input_grad) override;

 private:
  std::size_t in_, out_;
  bool with_bias_;
  float init_std_;
  DType weight_dtype_ = DType::F32;
  const float* weight_ = nullptr;
  const void* weight_lowp_ = nullptr;
  float* weight_grad_ = nullptr;
  const float* bias_ = nullptr;
  float* bias_grad_ = nullptr;
  TensorSpec in_spec_, out_spec_;
};

class ColumnParallelLinear : public Module {
 public:
  // Throws UsageError if tp.size() does not divide out_features.
  ColumnParallelLinear(std::string name, std::size_t in_features, std::size_t out_features, Communicator& tp,
                       bool with_bias, float init_std);
  ~ColumnParallelLinear() override;
  std::vector<ParameterSpec> parameters() const override;
  void bind(ParameterBuffers& buffers) override;
  TensorSpec prepare(const TensorSpec& input, const Geometry& geometry, int slots, ExecutionContext& context) override;
  void forward(StepState& step, int slot, const Tensor& input, const Tensor& output) override;
  void backward(StepState& step, int slot, const Tensor& input, const Tensor& output, const Tensor& output_grad,
                const Tensor& input_grad) override;

 private:
  std::unique_ptr<tenax::ColumnParallelLinear> layer_;
  bool with_bias_;
  TensorSpec in_, out_;
};

class RowParallelLinear : public Module {
 public:
  // Throws UsageError if tp.size() does not divide in_features.
  RowParallelLinear(std::string name, std::size_t in_features, std::size_t out_features, Communicator& tp,
                    float init_std);
  ~RowParallelLinear() override;
  std::vector<ParameterSpec> parameters() const override;
  void bind(ParameterBuffers& buffers) override;
  TensorSpec prepare(const TensorSpec& input, const Geometry& geometry, int slots, ExecutionContext& context) override;
  void forward(StepState& step, int slot, const Tensor& input, const Tensor& output) override;
  void backward(StepState& step, int slot, const Tensor& input, const Tensor& output, const Tensor& output_grad,
                const Tensor& input_grad) override;

 private:
  std::unique_ptr<tenax::RowParallelLinear> layer_;
  TensorSpec in_, out_;
};

// fc2(gelu(fc1(x))): fc1 column-parallel hidden -> ffn with its bias fused into the GeLU, fc2 row-parallel back.
class GeluMlp : public Module {
 public:
  GeluMlp(std::string name, std::size_t hidden, std::size_t ffn, Communicator& tp, float fc1_std, float fc2_std);
  ~GeluMlp() override;
  std::vector<ParameterSpec> parameters() const override;
  void bind(ParameterBuffers& buffers) override;
  TensorSpec prepare(const TensorSpec& input, const Geometry& geometry, int slots, ExecutionContext& context) override;
  void forward(StepState& step, int slot, const Tensor& input, const Tensor& output) override;
  void backward(StepState& step, int slot, const Tensor& input, const Tensor& output, const Tensor& output_grad,
                const Tensor& input_grad) override;

 private:
  std::size_t hidden_, ffn_local_;
  std::unique_ptr<tenax::ColumnParallelLinear> fc1_;
  std::unique_ptr<tenax::RowParallelLinear> fc2_;
  std::vector<Tensor> pre_, act_;  // per slot: fc1's output before and after the GeLU
  Tensor dact_, dpre_;
  TensorSpec spec_;
};

// Multi-head causal self-attention (GPT-2), Megatron placement: the QKV projection is column-parallel and split by
// heads (tp rank r holds heads [r H/tp, (r+1) H/tp) and their q, k, v: kernels/attention.hpp gives the column order,
// which does not depend on tp, so checkpoints reshard across tp sizes), the attention core runs per local head, and the
// output projection is row-parallel (one all-reduce). Saves q, k, v, the merged heads and, unless `recompute`, the
// attention probabilities (B H T T floats per micro-batch); with `recompute` the backward recomputes them from q and k
// (activation recomputation of the attention core: less memory, one more product).
//
// The core: on a CUDA context with a bf16/fp16 policy, cuDNN's fused flash attention where it can run this layer's
// problem (TENAX_ATTENTION=auto; =fused requires it, =batched never uses it): per slot it keeps the 16-bit QKV rows and
// one float per query row, and `recompute` has nothing left to recompute. Otherwise the batched core (ops.hpp's
// attention_forward), which keeps q, k, v and, unless `recompute`, the probabilities per slot. The choice is made once
// the layer knows both its geometry (prepare) and its precision (bind), and logged (subsystem "attention").
class CausalSelfAttention : public Module {
 public:
  // Throws UsageError unless heads divides hidden and tp divides heads.
  CausalSelfAttention(std::string name, std::size_t hidden, std::size_t heads, Communicator& tp, float init_std,
                      float proj_std, bool recompute = false);
  ~CausalSelfAttention() override;
  std::vector<ParameterSpec> parameters() const override;
  void bind(ParameterBuffers& buffers) override;
  TensorSpec prepare(const TensorSpec& input, const Geometry& geometry, int slots, ExecutionContext& context) override;
  void forward(StepState& step, int slot, const Tensor& input, const Tensor& output) override;
  void backward(StepState& step, int slot, const Tensor& input, const Tensor& output, const Tensor& output_grad,
                const Tensor& input_grad) override;

 private:
  // Allocates the core's buffers once both prepare and bind have run (in either order).
  void choose_core();

  std::size_t hidden_, heads_local_, head_dim_;
  bool recompute_;
  DType input_dtype_ = DType::F32;
  bool bound_ = false, fused_ = false;
  ExecutionContext* context_ = nullptr;  // set by prepare
  std::size_t sequences_ = 0, seq_len_ = 0;
  int slots_ = 0;
  std::unique_ptr<tenax::ColumnParallelLinear> qkv_;
  std::unique_ptr<tenax::RowParallelLinear> proj_;
  std::vector<Tensor> q_, k_, v_, merged_, probs_;  // per slot (q, k, v, probs: batched core)
  std::vector<Tensor> qkv16_, stats_;               // per slot (fused core)
  Tensor qkv_out_, o_, dmerged_, do_, dq_, dk_, dv_, dqkv_;
  TensorSpec spec_;
};

// A pre-LayerNorm GPT block: x + attention(layernorm(x)), then + mlp(layernorm(.)) with a 4x GeLU MLP. Parameter names
// "<name>.ln_1", "<name>.attn.qkv", "<name>.attn.proj", "<name>.ln_2", "<name>.mlp.fc1", "<name>.mlp.fc2". GPT-2's
// initialisation: weights N(0, init_std^2), the projections into the residual stream N(0, (init_std^2 / (2 layers))).
std::unique_ptr<Module> transformer_block(const std::string& name, std::size_t hidden, std::size_t heads,
                                          std::size_t layers, Communicator& tp, float init_std, bool recompute);

// The output head: logits = x W^T over the vocabulary (column-parallel: each tp rank holds vocab/tp rows of W), then
// the vocabulary-parallel softmax cross-entropy against StepState::targets (three small all-reduces). Backward starts
// from the logits' gradient kept by forward (scaled by StepState::grad_scale); output_grad is ignored.
class VocabParallelLoss : public Module {
 public:
  // weight_name: the projection's parameter ("": "<name>.weight"); a VocabParallelEmbedding's "<name>.weight" of the
  // same vocabulary and width ties the output head to the input embedding.
  VocabParallelLoss(std::string name, std::size_t hidden, std::size_t vocab, Communicator& tp, float init_std,
                    std::string weight_name = "");
  ~VocabParallelLoss() override;
  std::vector<ParameterSpec> parameters() const override;
  void bind(ParameterBuffers& buffers) override;
  TensorSpec prepare(const TensorSpec& input, const Geometry& geometry, int slots, ExecutionContext& context) override;
  void forward(StepState& step, int slot, const Tensor& input, const Tensor& output) override;
  void backward(StepState& step, int slot, const Tensor& input, const Tensor& output, const Tensor& output_grad,
                const Tensor& input_grad) override;

 private:
  void gather_logits(StepState& step, const float* local) const;
  std::size_t ld() const;  // the row stride of the logits: padded_row_stride of the local vocabulary

  std::size_t hidden_, vocab_;
  Communicator& tp_;
  std::unique_ptr<tenax::ColumnParallelLinear> proj_;
  std::vector<Tensor> dlogits_;  // per slot: the logits, overwritten by their gradient
  Tensor scratch_;
  TensorSpec in_;
};

}  // namespace tenax::nn
