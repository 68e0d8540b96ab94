// The optimizer over ParameterBuffers: fp32 master weights and moments for the ranges this rank owns (all of its
// parameters, or its ZeRO-1 slice of every bucket), updated by the fused kernels, which also write the model weights in
// the precision policy's dtype in the same pass.
//
//   fp32 mode: the master weights ARE the model weights (no copy).
//   bf16/fp16: the master weights are a separate fp32 copy of the owned ranges, made from the initial parameters.
//
// step() updates the owned ranges from the (reduced, unscaled) gradients and then publishes the parameters
// (ParameterBuffers::publish_params: all-gather under ZeRO-1, refresh of the fp32 compute copy). It is a collective on
// the data-parallel group under ZeRO-1. The state lives in the buffers' execution context, and the update kernels run
// there (on a device: enqueued on its compute stream, no host synchronisation).
#pragma once

#include <string>
#include <vector>

#include "tenax/data_parallel.hpp"
#include "tenax/kernels/params.hpp"
#include "tenax/model_state.hpp"
#include "tenax/tensor.hpp"

namespace tenax {

enum class OptimizerKind { AdamW, Sgd };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::AdamW;
  kernels::AdamWParams adamw;  // its `step` field is managed by the optimizer
  kernels::SgdParams sgd;

  // "adamw" or "sgd"; throws UsageError naming the choices.
  static OptimizerKind parse_kind(const std::string& text);
};

class Optimizer {
 public:
  Optimizer(ParameterBuffers& buffers, OptimizerConfig config);

  // One update of every owned range, then publish_params().
  void step();
  void set_learning_rate(float lr);
  long steps_taken() const { return steps_; }
  const OptimizerConfig& config() const { return config_; }

  // "master/<name>" (16-bit modes only: in fp32 the parameters are the master weights), and the moments:
  // "adamw.m/<name>", "adamw.v/<name>" or "sgd.momentum/<name>"; all fp32, ZeRO-sharded boxes where applicable.
  std::vector<StateEntry> state_entries();
  // Restores the step count (the moments and master weights are restored through state_entries()' pointers).
  void set_steps_taken(long steps) { steps_ = steps; }

 private:
  ParameterBuffers& buffers_;
  OptimizerConfig config_;
  Tensor master_;  // packed owned ranges; empty in fp32 mode
  Tensor m_;       // AdamW first moment or SGD velocity (packed owned ranges)
  Tensor v_;       // AdamW second moment
  long steps_ = 0;
};

}  // namespace tenax
