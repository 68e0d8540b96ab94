// Training loop of the example: builds the process groups, the stage model, the parameter buffers, the optimizer and
// the loss scaler for a layout, and runs one optimizer step at a time following the pipeline schedule.
//
// Batching: `batch` sequences per step in total, split evenly over the dp ranks, each rank's share split into
// micro-batches of `micro_batch` sequences. The objective is the mean token loss over the whole batch, so every layout
// optimises the same function.
//
// Device: on the host (the default) everything runs on the CPU with MPI groups and is bitwise reproducible. With
// Device::Cuda each rank drives one GPU (its node-local rank modulo the GPUs it sees), the tp, pp and dp groups are
// NCCL communicators split from one NCCL world, parameters, activations and gradients live on the GPU, and the host
// reads the loss back once per step. The MPI world still carries the host-side agreements (loss, overflow flag,
// checksums), and groups() stays the MPI groups the checkpoint code uses on the host copies of the state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "markov_data.hpp"
#include "mlp_lm_model.hpp"
#include "tenax/communicator.hpp"
#include "tenax/data_parallel.hpp"
#include "tenax/execution.hpp"
#include "tenax/layout.hpp"
#include "tenax/loss_scaler.hpp"
#include "tenax/metrics.hpp"
#include "tenax/optimizer.hpp"
#include "tenax/pipeline.hpp"
#include "tenax/pipeline_schedule.hpp"
#include "tenax/precision.hpp"

namespace tenax::examples {

struct TrainConfig {
  int tp = 1;
  int pp = 1;
  int dp = 0;  // 0: inferred from the world size
  ModelConfig model;
  PrecisionPolicy precision;
  int batch = 16;       // sequences per step, all dp ranks together
  int micro_batch = 4;  // sequences per micro-batch
  std::uint64_t seed = 1234;
  std::size_t branching = 4;  // successors per token in the data source
  DataParallelConfig data_parallel;
  PipelineScheduleKind schedule = PipelineScheduleKind::OneFOneB;
  Device device = Device::Host;
  OptimizerConfig optimizer;
  LossScalerConfig loss_scaler;
  // Steps (1-based) at which the last world rank makes one of its gradients infinite before the overflow check: tests
  // that every rank skips the step together.
  std::vector<long> inject_overflow_at;

  // The layout for a world of `world_size` ranks; UsageError if it does not divide the world.
  ParallelLayout layout(int world_size) const;
  // UsageError for any inconsistent setting (layout, model split, batch split), naming the fix.
  void validate(int world_size) const;
};

struct StepResult {
  long step = 0;                          // 1-based
  double loss = 0;                        // mean token loss of the global batch (same value on every rank)
  bool skipped = false;                   // overflow: no update this step
  float loss_scale = 1;                   // the scale used for this step
  std::size_t buckets_reduced_early = 0;  // buckets reduced while backward was still running
};

// What a checkpoint needs beyond the tensors: the data position is the next sample index of the stream, and the data
// RNG is counter-based (a function of seed and sample index), so (seed, data_position) is its whole state.
struct TrainingProgress {
  long step = 0;
  long optimizer_steps = 0;  // fewer than `step` when fp16 overflows skipped updates (AdamW's bias correction uses it)
  std::uint64_t data_position = 0;
  std::uint64_t seed = 0;
  DynamicLossScaler::State loss_scaler;
};

class Trainer {
 public:
  // Collective over `world` (splits it into the process groups).
  Trainer(Communicator& world, TrainConfig config);
  ~Trainer();

  StepResult step();
  // Checksum of every parameter's global values, independent of the layout (tenax::global_checksum). Collective.
  std::uint64_t parameters_checksum();
  // Every parameter, master weight and optimizer moment as named global-tensor pieces (tenax/model_state.hpp), in host
  // memory. On a device these are host copies (a HostStateMirror) made at this call and refreshed at the end of later
  // steps (see set_host_state_refresh), and restore() copies them back to the device: what a checkpoint writes and
  // loads.
  std::vector<StateEntry> state_entries();
  // Device runs: the host copies are refreshed after every step whose number is a multiple of `every` (default 1:
  // every step; 0: never by itself). A checkpointing loop that saves every N steps sets N, and calls
  // sync_state_to_host() before saving at any other step. No effect on the host, where the entries are the state.
  void set_host_state_refresh(int every) { host_state_every_ = every; }
  void sync_state_to_host();
  TrainingProgress progress() const;
  // Resumes from a saved state: the caller has written every entry of state_entries() back (same layout) and passes the
  // progress saved with them. The next step() continues exactly where the saved run would have.
  void restore(const TrainingProgress& progress);
  // Attributes the phases of every later step() (data, compute, exposed communication, optimizer) to `metrics`, whose
  // begin_step/end_step the caller drives; null stops it. Not owned.
  void set_metrics(metrics::StepMetrics* metrics) { metrics_ = metrics; }
  // The MPI process groups (host memory), also on a device run.
  const ProcessGroups& groups() const { return groups_; }
  ExecutionContext& context() const { return *ctx_; }
  const ParallelLayout& layout() const { return groups_.layout; }
  double loss_floor() const { return data_.entropy_rate(); }

 private:
  void fill_micro_batch(int mb, std::vector<std::int32_t>& inputs, std::vector<std::int32_t>& targets) const;
  // Device runs: waits (bounded, with NCCL's error checks) for every operation issued on the NCCL groups, before the
  // host reads device results back. No-op on the host.
  void wait_for_device_communication();
  // The phase `phase` for the returned scope's lifetime (nothing without metrics).
  std::optional<metrics::StepMetrics::Scope> phase(metrics::Phase phase);

  Communicator& world_;
  TrainConfig config_;
  ProcessGroups groups_;
  // Device runs: the GPU context and the NCCL communicators the model computes with (declared before everything that
  // holds device memory or queues work on them, so they are destroyed last).
  std::unique_ptr<ExecutionContext> device_context_;
  ExecutionContext* ctx_ = &ExecutionContext::host();
  std::unique_ptr<Communicator> nccl_world_;
  ProcessGroups nccl_groups_;
  ProcessGroups* compute_groups_ = &groups_;
  MarkovSource data_;
  int micro_batches_;
  std::size_t rows_;  // tokens per micro-batch
  std::vector<PipelineAction> actions_;
  int slots_;
  std::unique_ptr<StageModel> model_;
  std::unique_ptr<ParameterBuffers> buffers_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<DynamicLossScaler> scaler_;
  std::unique_ptr<PipelineChannel> channel_;
  long step_ = 0;
  metrics::StepMetrics* metrics_ = nullptr;
  Tensor activation_buffer_, grad_buffer_;         // pipeline receive buffers, in the context's memory
  std::unique_ptr<HostStateMirror> state_mirror_;  // device runs, once state_entries() was asked for
  int host_state_every_ = 1;
};

}  // namespace tenax::examples
