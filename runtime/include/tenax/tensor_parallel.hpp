// Tensor (model) parallelism, Megatron style: a pair of linear layers splits its work over the tp ranks with exactly
// one all-reduce in each direction.
//
//   ColumnParallelLinear  W [out, in] split by rows (output features): each rank computes out/tp features.
//                         forward: identity on the input (every rank has the whole input);
//                         backward: all-reduce (sum) of the input gradient over tp.
//   RowParallelLinear     W [out, in] split by columns (input features): takes the column layer's split output.
//                         forward: all-reduce (sum) of the partial outputs over tp, then the (replicated) bias;
//                         backward: identity (the output gradient is already the same on every rank).
//   vocab_parallel_cross_entropy: softmax cross-entropy over logits split by vocabulary (the output of a
//                         ColumnParallelLinear over the vocabulary), with three small all-reduces per call.
//
// Layers hold no tensors: they declare their parameters (ParameterSpec, with the shard this tp rank holds) and, once
// the ParameterBuffers exist, bind() to them to find their weights, gradients and execution context. Activations are
// row-major [rows, features] fp32 arrays owned by the caller, in the memory of that context (host, or the CUDA device:
// tenax/execution.hpp), and every kernel runs there. Weight gradients are accumulated (+=), so micro-batches add up.
// Every collective runs on the tp communicator given at construction (an NCCL one for a device context), ordered after
// the compute stream's work and before the next kernel by events; all tp ranks call the same layers in the same order.
//
// Matrix products: fp32 on the host. On a device with 16-bit model weights (bf16/fp16 policy) they take 16-bit inputs
// (the weights' 16-bit copy as the optimizer wrote it, activations and gradients rounded on the fly) and accumulate in
// fp32 on tensor cores (ops::gemm_mixed); outputs and weight gradients stay fp32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tenax/communicator.hpp"
#include "tenax/data_parallel.hpp"
#include "tenax/execution.hpp"
#include "tenax/model_state.hpp"

namespace tenax {

class ColumnParallelLinear {
 public:
  // Throws UsageError if tp.size() does not divide out_features (naming the layer and the sizes). weight_name: ""
  // for its own weight "<name>.weight"; any other name (even "<name>.weight") borrows that layer's [out, in] weight,
  // split the same way (tied weights, tenax/nn.hpp).
  ColumnParallelLinear(std::string name, std::size_t in_features, std::size_t out_features, Communicator& tp,
                       bool with_bias, float init_std, std::string weight_name = "");

  std::vector<ParameterSpec> parameters() const;  // weight_name [, "<name>.bias"]
  void bind(ParameterBuffers& buffers);

  std::size_t in_features() const { return in_; }
  std::size_t out_features_local() const { return out_local_; }
  std::size_t out_begin() const { return out_begin_; }  // first output feature of this rank

  // y[rows, out_local] = x[rows, in] W_local^T, rows ld_y apart (0: out_local; padded_row_stride). The bias is NOT
  // added: the caller fuses it into its activation (ops::bias_gelu_forward) and accumulates its gradient there
  // (bias_gelu_backward into bias_grad()).
  void forward(const float* x, std::size_t rows, float* y, std::size_t ld_y = 0) const;
  // dW += dy^T x; if dx is not null, dx[rows, in] = all-reduce_tp(dy W_local). dy's rows are ld_dy apart (0:
  // out_local).
  void backward(const float* x, const float* dy, std::size_t rows, float* dx, std::size_t ld_dy = 0);

  const float* bias() const { return bias_; }
  float* bias_grad() { return bias_grad_; }
  // Parameter indices in the bound buffers (for ParameterBuffers::mark_grad_ready).
  std::vector<std::size_t> parameter_indices() const;

 private:
  std::string name_, weight_name_;
  bool borrows_weight_;  // weight_name was given: another layer owns the weight
  std::size_t in_, out_, out_local_, out_begin_;
  Communicator& tp_;
  bool with_bias_;
  float init_std_;
  std::size_t weight_index_ = 0, bias_index_ = 0;
  ExecutionContext* ctx_ = nullptr;
  DType weight_dtype_ = DType::F32;
  const void* weight_lowp_ = nullptr;  // the weight in weight_dtype_ (the same memory as weight_ in fp32)
  const float* weight_ = nullptr;
  float* weight_grad_ = nullptr;
  const float* bias_ = nullptr;
  float* bias_grad_ = nullptr;
};

class RowParallelLinear {
 public:
  // Throws UsageError if tp.size() does not divide in_features.
  RowParallelLinear(std::string name, std::size_t in_features, std::size_t out_features, Communicator& tp,
                    float init_std);

  std::vector<ParameterSpec> parameters() const;  // "<name>.weight" (split), "<name>.bias" (replicated)
  void bind(ParameterBuffers& buffers);

  std::size_t in_features_local() const { return in_local_; }
  std::size_t out_features() const { return out_; }

  // y[rows, out] = all-reduce_tp(x_local W_local^T) + bias.
  void forward(const float* x_local, std::size_t rows, float* y) const;
  // dW += dy^T x_local; dbias += column sums of dy; dx_local[rows, in_local] = dy W_local (no communication).
  void backward(const float* x_local, const float* dy, std::size_t rows, float* dx_local);

  std::vector<std::size_t> parameter_indices() const;

 private:
  std::string name_;
  std::size_t in_, out_, in_local_, in_begin_;
  Communicator& tp_;
  float init_std_;
  std::size_t weight_index_ = 0, bias_index_ = 0;
  ExecutionContext* ctx_ = nullptr;
  DType weight_dtype_ = DType::F32;
  const void* weight_lowp_ = nullptr;  // the weight in weight_dtype_ (the same memory as weight_ in fp32)
  const float* weight_ = nullptr;
  float* weight_grad_ = nullptr;
  const float* bias_ = nullptr;
  float* bias_grad_ = nullptr;
};

// The row stride for a [rows, cols] fp32 matrix that 16-bit matrix products write or read (the output head's logits
// and their gradient): cols rounded up to a multiple of 64 elements, so that each row starts 256-byte aligned, at a
// cost of under 64 columns. With GPT-2's 50257-token vocabulary packed, the head's three bf16 products ran at 95-145
// TFLOP/s on an H200 against 350-683 for the blocks' products, whose rows are aligned; the unaligned row stride (of
// the fp32 output in the forward, of the rounded gradient in the backward) is the likely cause, for cuBLAS's fastest
// kernels need aligned rows (docs/benchmarks.md, "Where a GPT-2 small step goes on the GPU").
constexpr std::size_t padded_row_stride(std::size_t cols) {
  return (cols + 63) / 64 * 64;
}

// Softmax cross-entropy over logits split by vocabulary across tp: this rank holds columns
// [vocab_begin, vocab_begin + vocab_local) of the [rows, vocab] logits. targets are global token ids.
// Returns the sum over rows of -log softmax(logits)[target] (the same value on every tp rank). If dlogits is not null
// it receives (softmax - onehot(target)) * grad_scale for this rank's columns; grad_scale is the weight of one row's
// loss in the objective (e.g. loss_scale / rows_in_the_global_batch). dlogits may alias logits.
// Throws UsageError for a target outside [0, vocab).
double vocab_parallel_cross_entropy(Communicator& tp, const float* logits, const std::int32_t* targets, float* dlogits,
                                    std::size_t rows, std::size_t vocab_local, std::size_t vocab_begin,
                                    std::size_t vocab, float grad_scale);

// The same on an execution context (tenax/execution.hpp): every pointer lives in ctx's memory, and the loss summed over
// rows is ADDED to *loss_sum (ctx's memory too, so on a device micro-batches gather into one value that is read back
// once per step instead of once per call). On the host, targets are checked as above; on a device a target outside
// [0, vocab) makes the loss NaN instead (a kernel cannot throw). The reductions over tp are ordered on the streams.
// ld is the row stride of logits and dlogits in elements (0: vocab_local; see padded_row_stride above).
void vocab_parallel_cross_entropy(ExecutionContext& ctx, Communicator& tp, const float* logits,
                                  const std::int32_t* targets, float* dlogits, std::size_t rows,
                                  std::size_t vocab_local, std::size_t vocab_begin, std::size_t vocab, float grad_scale,
                                  double* loss_sum, std::size_t ld = 0);

}  // namespace tenax
