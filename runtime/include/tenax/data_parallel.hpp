// Data parallelism: one rank's parameters in flat buffers, with gradients grouped into buckets that are reduced over
// the data-parallel group as soon as every gradient in a bucket is final, while the backward pass goes on.
//
// Buffers (one element per parameter element, all in the same flat order):
//   params   the model weights in the precision policy's dtype (fp32, bf16 or fp16);
//   weights  fp32 values of params that the layers compute with (the same memory as params in fp32 mode);
//   grads    fp32 gradients, accumulated over micro-batches.
// The flat order is the order of the specs given to the constructor, which must be the order in which their gradients
// become final during backward (the reverse of the forward order); buckets are consecutive runs of parameters of about
// bucket_bytes of gradients, so the first bucket fills first.
//
// Per step:  zero_grads();  backward ... mark_grad_ready(i) for each parameter once its last micro-batch is done ...;
//            finish_grad_sync();  [unscale_and_check_owned()]; optimizer step on owned_ranges(); publish_params().
// Without ZeRO every bucket is all-reduced (sum) and every rank owns all of it. With ZeRO-1 each bucket is padded to a
// multiple of the data-parallel size and reduce-scattered: rank d owns the d-th slice of every bucket, updates only
// that slice, and publish_params() all-gathers the parameters. The gradient reduction is a sum: callers scale the loss
// gradient by 1/(global batch) so that the sum is the mean.
//
// Collectives: mark_grad_ready() may issue a collective on the dp communicator; all dp ranks mark the same parameters
// in the same order (they run the same model), so they issue the same bucket reductions in the same order.
//
// Memory: the buffers live in the memory of the execution context given at construction (tenax/execution.hpp; the host
// by default), and so do the pointers weight(), grad(), param() and the flat_*() accessors return. On a device context
// the dp communicator must be an NCCL one, and the bucket reductions overlap the backward pass: each is enqueued on the
// communicator's stream as soon as its bucket is final, after an event that marks the end of the gradient kernels
// queued so far on the compute stream, and the host never waits for it; finish_grad_sync() makes the compute stream
// wait for the communicator's stream (an event again), so the optimizer's kernels read the reduced gradients.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tenax/communicator.hpp"
#include "tenax/execution.hpp"
#include "tenax/model_state.hpp"
#include "tenax/tensor.hpp"

namespace tenax {

struct DataParallelConfig {
  std::size_t bucket_bytes = std::size_t{32} << 20;  // gradient bytes per bucket
  bool zero1 = false;                                // shard the optimizer (reduce-scatter + all-gather)

  void validate() const;  // UsageError for a zero bucket size
};

// A flat element range [begin, begin+count) of the buffers.
struct FlatRange {
  std::size_t begin = 0;
  std::size_t count = 0;
};

// Pure layout computation (no communication): where each parameter and bucket lives in the flat buffers.
struct FlatLayout {
  struct Bucket {
    std::size_t begin = 0;        // first element
    std::size_t count = 0;        // elements including padding (a multiple of dp_size with ZeRO-1)
    std::size_t first_param = 0;  // parameters [first_param, end_param)
    std::size_t end_param = 0;
  };
  std::vector<std::size_t> param_offset;  // flat offset of each parameter
  std::vector<std::size_t> param_bucket;  // bucket of each parameter
  std::vector<Bucket> buckets;
  std::size_t total = 0;  // elements including padding

  static FlatLayout build(const std::vector<ParameterSpec>& specs, std::size_t bucket_bytes, int dp_size, bool zero1);
  // The slice of bucket b that dp rank `dp_rank` owns (the whole bucket without ZeRO-1).
  FlatRange owned(std::size_t bucket, int dp_rank, int dp_size, bool zero1) const;
};

class ParameterBuffers {
 public:
  // tp_rank: this rank's tensor-parallel index (a parameter that TP does not split is primary on TP rank 0 only).
  ParameterBuffers(std::vector<ParameterSpec> specs, DType param_dtype, Communicator& dp, int tp_rank,
                   DataParallelConfig config, ExecutionContext& context = ExecutionContext::host());
  ParameterBuffers(const ParameterBuffers&) = delete;
  ParameterBuffers& operator=(const ParameterBuffers&) = delete;

  std::size_t size() const { return specs_.size(); }
  const ParameterSpec& spec(std::size_t i) const { return specs_.at(i); }
  // Index of the parameter named `name`; throws std::logic_error if there is none (a model wiring bug).
  std::size_t index_of(const std::string& name) const;
  DType param_dtype() const { return param_dtype_; }
  const FlatLayout& layout() const { return layout_; }
  const DataParallelConfig& config() const { return config_; }
  Communicator& dp() const { return dp_; }
  ExecutionContext& context() const { return ctx_; }

  float* weight(std::size_t i) { return weights_ + layout_.param_offset.at(i); }
  float* grad(std::size_t i) { return grads_.as<float>() + layout_.param_offset.at(i); }
  // Parameter i in the param dtype (the 16-bit copy the optimizer writes; the same memory as weight(i) in fp32).
  void* param(std::size_t i) {
    return static_cast<unsigned char*>(params_.data()) + layout_.param_offset.at(i) * dtype_size(param_dtype_);
  }
  float* flat_weights() { return weights_; }
  float* flat_grads() { return grads_.as<float>(); }
  void* flat_params() { return params_.data(); }

  // Sets every parameter from (seed, name, global index) as its spec says, identically for every layout (the values
  // are computed on the host and copied to the context's memory).
  void initialize(std::uint64_t seed);

  void zero_grads();
  // Parameter i's gradient is final for this step. Issues the bucket's reduction when it was the bucket's last one.
  void mark_grad_ready(std::size_t i);
  // Reduces any bucket not reduced yet (all of them when nothing was marked, e.g. a stage without backward work) and
  // resets the readiness for the next step. Afterwards owned_ranges() of grads hold the data-parallel sum.
  void finish_grad_sync();
  std::size_t buckets_reduced_during_backward() const { return reduced_early_; }

  // The flat ranges this rank updates (every bucket without ZeRO-1, one slice per bucket with it).
  const std::vector<FlatRange>& owned_ranges() const { return owned_; }
  // grads *= inv_scale on owned ranges; returns 1.0f if any was inf/NaN (before or after scaling), else 0.0f. On a
  // device the flag is read back, so the call waits for the compute stream (once per step, for the loss scaler).
  float unscale_and_check_owned(float inv_scale);
  // After the optimizer wrote owned ranges of params: all-gather them (ZeRO-1) and refresh the fp32 weights.
  void publish_params();
  // After params were written from outside (a checkpoint restore through parameter_entries()): recompute the fp32
  // weights from them. Local, no communication.
  void refresh_weights();

  // One entry per parameter (name "param/<name>") in the param dtype. The entries point into the context's memory and
  // say so (StateEntry::device); HostStateMirror gives host copies of device entries.
  std::vector<StateEntry> parameter_entries();
  // Entries for a buffer holding only the owned ranges, packed one after another in order (as the optimizer stores its
  // state), named "<prefix>/<name>".
  // `packed` lives in the context's memory.
  std::vector<StateEntry> owned_entries(const std::string& prefix, void* packed, DType dtype);
  // True when this rank is the canonical holder of parameter i's values among its replicas.
  bool is_primary_holder(std::size_t i) const;

 private:
  void reduce_bucket(std::size_t b);

  std::vector<ParameterSpec> specs_;
  DType param_dtype_;
  Communicator& dp_;
  DataParallelConfig config_;
  ExecutionContext& ctx_;
  FlatLayout layout_;
  Tensor params_;
  Tensor weights_storage_;  // only in 16-bit modes
  float* weights_ = nullptr;
  Tensor grads_;
  Tensor scatter_scratch_;     // ZeRO-1 receive buffer (reduce_scatter may not run in place)
  Tensor found_nonfinite_;     // device flag of unscale_and_check_owned (device contexts only)
  bool comm_pending_ = false;  // a bucket reduction was enqueued that the compute stream has not waited for
  std::vector<FlatRange> owned_;
  std::vector<std::size_t> ready_in_bucket_;
  std::vector<bool> param_ready_;
  std::vector<bool> bucket_done_;
  std::size_t reduced_early_ = 0;
  int tp_rank_;
};

}  // namespace tenax
