// The example model: a multi-layer MLP language model, split over tensor- and pipeline-parallel ranks.
//
//   tokens -> embedding [vocab, hidden]
//          -> N residual blocks:  x + fc2(gelu(fc1(layernorm(x))))   fc1: column-parallel hidden -> 4*hidden
//                                                                      fc2: row-parallel    4*hidden -> hidden
//          -> final layernorm -> output projection (column-parallel over the vocabulary, no bias)
//          -> vocab-parallel softmax cross-entropy against the next token
//
// A StageModel holds one pipeline stage's share: the first stage owns the embedding, the last the head, and the blocks
// are spread as evenly as possible (earlier stages get the extra ones). It runs one micro-batch's forward or backward
// at a time and keeps each in-flight micro-batch's activations in a slot until its backward.
//
// Everything the stage computes with lives in its execution context's memory (host or CUDA device): activations, slots
// and scratch, and the parameters of the ParameterBuffers it binds to (made on the same context). Only the token ids
// and targets arrive as host arrays (the data source runs on the host); the stage copies them in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "tenax/communicator.hpp"
#include "tenax/data_parallel.hpp"
#include "tenax/execution.hpp"
#include "tenax/layers.hpp"
#include "tenax/layout.hpp"
#include "tenax/model_state.hpp"
#include "tenax/tensor.hpp"
#include "tenax/tensor_parallel.hpp"

namespace tenax::examples {

struct ModelConfig {
  std::size_t vocab = 256;
  std::size_t hidden = 128;
  std::size_t layers = 4;
  std::size_t seq_len = 32;

  std::size_t ffn() const { return 4 * hidden; }
  // UsageError if the layout cannot split this model: tp must divide the hidden size (hence the 4*hidden MLP width)
  // and the vocabulary; pp may not exceed the number of blocks.
  void validate(const ParallelLayout& layout) const;
};

// Blocks [first, end) of stage `stage` out of `stages`.
struct BlockRange {
  std::size_t first, end;
};
BlockRange blocks_of_stage(std::size_t layers, int stages, int stage);

class StageModel {
 public:
  // rows_per_micro_batch: tokens per micro-batch (micro-batch size * seq_len); slots: micro-batches in flight at once.
  StageModel(const ModelConfig& config, Communicator& tp, int stage, int stages, std::size_t rows_per_micro_batch,
             int slots, DType activation_dtype, ExecutionContext& context = ExecutionContext::host());

  // The parameters of this stage in gradient-ready order (the reverse of the forward order).
  std::vector<ParameterSpec> parameters() const;
  void bind(ParameterBuffers& buffers);

  bool is_first() const { return stage_ == 0; }
  bool is_last() const { return stage_ == stages_ - 1; }
  std::size_t activation_size() const { return rows_ * config_.hidden; }

  // Forward of one micro-batch in `slot`. First stage: reads `tokens` (host); others: `input` (activation_size floats
  // in the context's memory). Last stage: computes the loss against `targets` (host) and the logits' gradient (scaled
  // by grad_scale per row); on the host it returns the loss summed over the micro-batch's rows, on a device it adds
  // that sum to a device total (read once per step by take_loss_sum()) and returns 0. Other stages return 0 and leave
  // their output in output(slot).
  double forward(int slot, const std::int32_t* tokens, const float* input, const std::int32_t* targets,
                 float grad_scale);
  // Device contexts: the loss summed over every forward since the previous call (waits for the stream), then resets
  // the total. 0 on the host and on stages other than the last.
  double take_loss_sum();
  const float* output(int slot) const;
  // Backward of the micro-batch in `slot`. Last stage: starts from the logits' gradient kept by forward; others: from
  // `output_grad`. Leaves the input gradient in input_grad(slot) (not on the first stage). When `mark_ready` is set
  // (the step's last micro-batch), tells `buffers` as each layer's gradients become final, so buckets reduce early.
  void backward(int slot, const float* output_grad, ParameterBuffers* mark_ready);
  const float* input_grad(int slot) const;

 private:
  struct Block {
    LayerNorm ln;
    ColumnParallelLinear fc1;
    RowParallelLinear fc2;
  };
  // Every member is an fp32 (or i32) tensor in the context's memory.
  struct BlockActivations {
    Tensor x, ln_out, mean, rstd, pre, act;
  };
  struct Slot {
    Tensor tokens, targets;
    std::vector<BlockActivations> blocks;
    Tensor out;  // output of the last block (residual stream)
    Tensor head_ln, head_mean, head_rstd, dlogits;
    Tensor grad;  // gradient flowing backward through the residual stream
  };
  Tensor make(std::size_t n, DType dtype = DType::F32) const;
  void round_activations(float* values, std::size_t n);
  void mark(ParameterBuffers* buffers, const std::vector<std::size_t>& indices);

  ExecutionContext& ctx_;
  ModelConfig config_;
  Communicator& tp_;
  int stage_, stages_;
  std::size_t rows_;
  DType activation_dtype_;
  BlockRange range_;
  std::unique_ptr<Embedding> embedding_;
  std::vector<Block> blocks_;
  std::unique_ptr<LayerNorm> final_ln_;
  std::unique_ptr<ColumnParallelLinear> output_;
  std::vector<Slot> slots_;
  Tensor scratch_dact_, scratch_dpre_, scratch_dln_;
  Tensor loss_sum_;  // device contexts: the loss total of the forwards since take_loss_sum()
};

}  // namespace tenax::examples
