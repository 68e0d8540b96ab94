// Internal: what an Engine holds (shared by the engine's source files).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "engine/checkpoint_interval.hpp"
#include "engine/failure_streak.hpp"
#include "tenax/checkpoint.hpp"
#include "tenax/data_loader.hpp"
#include "tenax/engine.hpp"
#include "tenax/execution.hpp"
#include "tenax/layout.hpp"
#include "tenax/loss_scaler.hpp"
#include "tenax/metrics.hpp"
#include "tenax/model_state.hpp"
#include "tenax/optimizer.hpp"
#include "tenax/pipeline.hpp"

namespace tenax {

struct Engine::Impl {
  // The tensors of one micro-batch in flight through one chunk.
  struct Slot {
    Tensor input;        // I32 tokens (first virtual stage) or the activation received from the previous one
    Tensor output;       // the chunk's output (empty on the last virtual stage)
    Tensor output_grad;  // the gradient of the output, received from the next virtual stage
    Tensor targets;      // I32 targets (last virtual stage)
  };
  struct Chunk {
    int virtual_stage = 0;
    std::unique_ptr<nn::Module> module;
    nn::TensorSpec input, output;
    std::vector<Slot> slots;
    // The gradient of the input of the chunk's latest backward, sent to the previous virtual stage in the next exchange
    // (or read by the local backward of that stage). One per chunk, not per slot: every program consumes it before the
    // chunk's next backward, and the slot itself is free as soon as its backward ran.
    Tensor input_grad;
    std::vector<int> free_slots;
    std::map<int, int> slot_of;  // micro-batch -> slot, while in flight
    std::vector<std::size_t> parameter_indices;
    int backwards_done = 0;  // in the current step (the last one marks the gradients ready)
  };

  Impl(Communicator& world, EngineConfig config, std::shared_ptr<const BatchSource> data);
  ~Impl() { op_profile_discard(); }  // the host context outlives the engine: leave no profile of ours running there
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Setup (engine_setup.cpp).
  void resolve_layout();
  void make_groups();
  void build_chunks(const ChunkBuilder& build);
  void make_state();

  // The step (step_executor.cpp).
  StepResult train_step();
  void run_program(const std::vector<std::int32_t>* batch);  // batch: this rank's samples of the step (host)
  Chunk& chunk_of(int virtual_stage);
  Slot& slot_for(int micro_batch, int virtual_stage);  // allocating it on first use in the step
  void release(int micro_batch, int virtual_stage);
  void mark_ready(const std::vector<std::size_t>& indices);
  void forward_only(const std::vector<std::int32_t>& samples, std::size_t sequences);  // evaluate / generate
  float optimizer_phase(StepResult& result);
  // After a step: a non-finite loss (or gradient norm) of an applied step, or fp16 overflows that keep skipping steps
  // at the smallest loss scale, stop the run with a UsageError on every rank (the values are agreed) before anything
  // of it is saved.
  void check_divergence(const StepResult& result);
  int skips_at_min_scale = 0;
  bool nonfinite_gradients = false;  // the step's gradients (agreed over the world); its update was not applied

  // Checkpoints (engine_checkpoint.cpp).
  std::vector<StateEntry> state_entries();  // host memory (a mirror on a device)
  Blobs progress_blobs() const;
  // A checkpoint tier's periodic interval in force (CheckpointPolicy::every, or the automatic choice) and what the
  // automatic choice measured since its last choice on this rank.
  struct TierInterval {
    int every = 0;
    double step_seconds = 0;
    long steps = 0;
    std::string note;  // the automatic choice and its inputs, for the summary
  };
  void open_checkpoints();
  ResumeInfo resume();
  void save_checkpoint(bool emergency);
  // Waits until nothing is in flight and raises unless this step's checkpoint is committed (Checkpointer::settle);
  // the checkpoint this run resumed from, committed before, needs nothing.
  void settle_checkpoint();
  // Periodic save and commits, with the failure policy; step_seconds: the step just taken (automatic interval).
  void after_step_checkpoint(double step_seconds);
  // Automatic interval: a tier's next interval from its save's blocking time and the steps it was in flight (agreed
  // over the ranks); `what` names the tier in the note ("checkpoint interval", "node-local checkpoint interval").
  void choose_interval(TierInterval& tier, const SaveMeasure& save, std::string_view what);
  // The summary's lines on the automatic intervals ("" when neither is automatic).
  std::string interval_notes() const;

  std::optional<metrics::StepMetrics::Scope> phase(metrics::Phase p);

  // TENAX_PROFILE_OPS (op_profile_window.cpp): start the op profile at the first step of the window this run trains,
  // read its events back after every step, write it after the window's last; discard it if the engine goes first.
  void op_profile_step_begins();
  void op_profile_step_ends();
  void op_profile_discard() noexcept;
  std::int64_t op_profile_first = -1, op_profile_end = -1;
  bool op_profile_running = false;  // this engine started the context's profile
  bool in_run = false;              // inside run(): its step callback may not call run(), step() or resume()
  bool warned_unsaved = false;      // save() without a checkpoint directory said so once
  std::int64_t op_profile_started = 0;

  Communicator& world;
  EngineConfig config;
  std::shared_ptr<const BatchSource> data;

  ProcessGroups groups;  // MPI (host) groups: agreements, checkpoints, metrics
  std::unique_ptr<ExecutionContext> device_context;
  ExecutionContext* ctx = &ExecutionContext::host();
  std::unique_ptr<Communicator> nccl_world;
  ProcessGroups nccl_groups;
  ProcessGroups* compute = &groups;  // the groups the model computes with (NCCL on a device)

  PipelineSpec spec;
  std::vector<PipelineStep> program;
  int micro_batches = 1;
  std::size_t sequences_per_rank = 0;  // per step, this dp rank
  nn::Geometry geometry;
  std::vector<Chunk> chunks;  // this rank's, chunk c holds virtual stage c * pp + stage
  bool holds_first = false, holds_last = false;

  // Tied parameters (tenax/nn.hpp). deferred_ready[i]: parameter i's gradient is complete only after the whole
  // program (several modules on this rank use it, or copies on other pipeline stages add to it), so the engine marks it
  // ready itself. One TiedGroup per set of pipeline stages sharing parameters: the group of this rank's peers on those
  // stages and the indices it sums, in name order (the same order on every stage).
  struct TiedGroup {
    std::unique_ptr<Communicator> comm;
    std::vector<std::string> names;  // sorted
    std::vector<std::size_t> indices;
  };
  std::vector<bool> deferred_ready;
  std::vector<std::string> tied_local_names;  // parameters two or more modules of this rank declare
  std::vector<TiedGroup> tied;
  void find_tied_parameters(std::vector<ParameterSpec>& specs,
                            const std::map<std::string, int>& local_users);  // engine_setup.cpp
  void sum_tied_gradients();                                                 // step_executor.cpp

  std::unique_ptr<ParameterBuffers> buffers;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<DynamicLossScaler> scaler;
  std::unique_ptr<PipelineChannel> channel;
  nn::StepState state;
  Tensor loss_sum;  // F64 in the context's memory
  Tensor norm_sum;  // F64 (device gradient norms)
  std::unique_ptr<DataLoader> loader;
  std::vector<std::int32_t> eval_scratch;

  long step = 0;
  metrics::StepMetrics* metrics = nullptr;
  int nodes = 1;  // the nodes the world spans: a site's per-node MTBF over them is the job's (choose_mtbf)

  // Checkpoints.
  std::string checkpoint_dir;  // "" : none
  std::unique_ptr<Checkpointer> writer;
  std::unique_ptr<HostStateMirror> mirror;
  std::optional<long> last_saved;
  // last_saved is the checkpoint this run resumed from: committed by an earlier run to the shared tier (loaded), or
  // read from a node-local copy, which the shared tier may lack (local_only: a save of that step still writes it).
  bool last_saved_loaded = false;
  bool last_saved_local_only = false;
  // The periodic interval of each tier in force (TierInterval).
  TierInterval shared_interval;
  TierInterval local_interval{.every = 1};  // CheckpointPolicy::local_automatic: the first save after step 1
  std::optional<long> last_local_saved;
  SharedSaveCost shared_cost;  // automatic intervals: what each tier's saves cost training
  LocalSaveCost local_cost;
  FailureStreak save_failures;
  std::string summary;
};

}  // namespace tenax
