// Modules: layers that know their own backward pass. A model developer composes a pipeline stage's model chunk from
// library modules (tenax/nn.hpp) and writes no backward; a custom layer derives from Module and implements the same
// four calls. The engine (tenax/engine.hpp) drives them.
//
// Life of a module, in the order the engine calls it:
//   parameters()  the parameters this rank holds (ParameterSpec: the global shape and this rank's shard), in forward
//                 order. Names are global and unique in the model ("blocks.3.attn.qkv.weight").
//   bind(buffers) once the parameter buffers exist: find the weights, gradients and execution context.
//   prepare(...)  once, before the first step: the input's spec (shape and dtype) and the micro-batch geometry; the
//                 module checks the input, allocates what it saves for backward for `slots` micro-batches in flight
//                 (in the context's memory), and returns its output's spec.
//   forward / backward, many times: forward(step, slot, input, output) for micro-batch slot `slot`, later
//                 backward(step, slot, input, output, output_grad, input_grad) for the same slot with the same
//                 `input` and `output`, which the caller keeps unchanged in between (so a module saves only what it
//                 cannot recompute from them). `output_grad` is read-only; `input_grad` (written) is an empty tensor
//                 when the input needs no gradient (token ids). Weight gradients are accumulated (+=) so micro-batches
//                 add up.
//
// Tensors: every tensor a module receives is a typed view (shape, dtype, device) in the execution context's memory;
// activations are row-major [rows, features] F32 with rows = sequences x seq_len of the micro-batch, token ids I32
// [rows]. Modules check what they receive (check_tensor) and refuse anything else with a UsageError naming the module.
// Tensor parallelism lives inside modules (their communicator is given at construction); every tp rank calls the same
// modules in the same order.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tenax/communicator.hpp"
#include "tenax/data_parallel.hpp"
#include "tenax/dtype.hpp"
#include "tenax/execution.hpp"
#include "tenax/model_state.hpp"
#include "tenax/tensor.hpp"

namespace tenax::nn {

// A tensor's shape and dtype.
struct TensorSpec {
  Shape shape;
  DType dtype = DType::F32;
  friend bool operator==(const TensorSpec&, const TensorSpec&) = default;
};
std::string to_string(const TensorSpec& spec);  // "f32[256, 64]"

// The micro-batch geometry, fixed for a run.
struct Geometry {
  std::size_t sequences = 0;  // per micro-batch
  std::size_t seq_len = 0;    // tokens per sequence
  std::size_t rows() const { return sequences * seq_len; }
};

// What every module sees during a step. Set up by the engine; a module reads it.
struct StepState {
  ExecutionContext* context = nullptr;
  DType activation_dtype = DType::F32;  // the precision policy's: activations are rounded to it at block boundaries
  Geometry geometry;
  float grad_scale = 1.0f;  // the weight of one token's loss in the objective (loss scale / tokens per global batch)
  // Per slot, I32 [rows] in the context's memory: the targets, where the last virtual stage runs (loss modules read
  // them); empty elsewhere. (The tokens are the first module's input.)
  std::vector<Tensor> targets;
  double* loss_sum = nullptr;  // F64 in the context's memory: loss modules ADD the micro-batch's summed token loss
  bool logits_only = false;    // inference: loss modules write the logits to `logits` and compute no loss
  Tensor logits;               // host F32 [rows, vocab], the whole vocabulary on every tp rank (made by the loss module
                               // when empty)

  ExecutionContext& ctx() const { return *context; }
};

class Module {
 public:
  explicit Module(std::string name);
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const { return name_; }

  virtual std::vector<ParameterSpec> parameters() const { return {}; }
  virtual void bind(ParameterBuffers& buffers) { (void)buffers; }
  virtual TensorSpec prepare(const TensorSpec& input, const Geometry& geometry, int slots,
                             ExecutionContext& context) = 0;
  virtual void forward(StepState& step, int slot, const Tensor& input, const Tensor& output) = 0;
  virtual void backward(StepState& step, int slot, const Tensor& input, const Tensor& output, const Tensor& output_grad,
                        const Tensor& input_grad) = 0;

  // The indices of this module's parameters (and its children's) in the bound buffers: the engine marks them ready
  // for the data-parallel reduction once the step's last backward through the module is done. Default: looked up by
  // the names parameters() gives.
  virtual std::vector<std::size_t> parameter_indices(const ParameterBuffers& buffers) const;

 protected:
  // Throws UsageError "<module>: <what> is <actual>, expected <want>" unless `t` is a tensor of `want` in the context's
  // memory.
  void check_tensor(const Tensor& t, const TensorSpec& want, const ExecutionContext& context, const char* what) const;
  // Allocates one zeroed tensor per slot.
  static std::vector<Tensor> per_slot(ExecutionContext& context, int slots, Shape shape, DType dtype = DType::F32);

 private:
  std::string name_;
};

// Modules one after another. Keeps each child's output per slot (the next child's input, kept until its backward) and
// two gradient buffers for the backward pass. Also what the engine runs for one model chunk.
class Sequential : public Module {
 public:
  Sequential(std::string name, std::vector<std::unique_ptr<Module>> children);

  std::vector<ParameterSpec> parameters() const override;
  void bind(ParameterBuffers& buffers) override;
  TensorSpec prepare(const TensorSpec& input, const Geometry& geometry, int slots, ExecutionContext& context) override;
  void forward(StepState& step, int slot, const Tensor& input, const Tensor& output) override;
  void backward(StepState& step, int slot, const Tensor& input, const Tensor& output, const Tensor& output_grad,
                const Tensor& input_grad) override;
  std::vector<std::size_t> parameter_indices(const ParameterBuffers& buffers) const override;

  // backward, calling after_child(child) as soon as each child's backward returned (the engine marks that child's
  // gradients ready there, so their data-parallel reduction starts while the rest of backward runs).
  void backward_each(StepState& step, int slot, const Tensor& input, const Tensor& output, const Tensor& output_grad,
                     const Tensor& input_grad, const std::function<void(Module&)>& after_child);

  std::size_t size() const { return children_.size(); }
  Module& child(std::size_t i) { return *children_.at(i); }
  const TensorSpec& output_spec() const { return output_; }

 private:
  std::vector<std::unique_ptr<Module>> children_;
  std::vector<TensorSpec> specs_;                 // specs_[i]: child i's input; specs_.back(): the output
  std::vector<std::vector<Tensor>> activations_;  // [child][slot]: child i's output for i < size - 1
  Tensor grad_[2];                                // backward ping-pong, sized for the largest intermediate
  TensorSpec output_;
};

// y = x + inner(x), rounded to the step's activation dtype (a transformer block's residual connection; the rounding
// is where a 16-bit run would store the residual stream). inner must map its input spec to itself. The sum is formed
// in the inner module's output tensor, so an inner module must not read its own output in backward.
class Residual : public Module {
 public:
  explicit Residual(std::unique_ptr<Module> inner);

  std::vector<ParameterSpec> parameters() const override { return inner_->parameters(); }
  void bind(ParameterBuffers& buffers) override { inner_->bind(buffers); }
  TensorSpec prepare(const TensorSpec& input, const Geometry& geometry, int slots, ExecutionContext& context) override;
  void forward(StepState& step, int slot, const Tensor& input, const Tensor& output) override;
  void backward(StepState& step, int slot, const Tensor& input, const Tensor& output, const Tensor& output_grad,
                const Tensor& input_grad) override;
  std::vector<std::size_t> parameter_indices(const ParameterBuffers& buffers) const override {
    return inner_->parameter_indices(buffers);
  }

 private:
  std::unique_ptr<Module> inner_;
  TensorSpec spec_;
};

}  // namespace tenax::nn
