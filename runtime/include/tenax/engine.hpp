// The training engine: a model developer gives tenax a model (per pipeline chunk, made of modules: tenax/module.hpp,
// tenax/nn.hpp), a batch source and a configuration; the engine owns everything else.
//
//   tenax::Runtime runtime(argc, argv);
//   tenax::EngineConfig config;                 // batch, sequence length, precision, optimizer, checkpoints, ...
//   tenax::Engine engine(runtime.world(), config, build_chunk, std::make_shared<MySource>());
//   return engine.run();                        // resume, train, checkpoint, preempt, report; the exit code
//
// What it owns: the process groups of the layout (tp fastest, then dp, then pp; TENAX_LAYOUT, which tenax-launch and
// the SPANK plugin set, unless the config names one), the parameter buffers with data-parallel gradient buckets
// reduced during backward (ZeRO-1 optional), the pipeline program (GPipe, 1F1B, interleaved 1F1B over virtual
// stages) with its activation slots and transfers, mixed precision with the rank-agreed fp16 overflow skip, the
// optimizer and its learning-rate schedule, asynchronous checkpoints (the state is derived from the buffers and the
// optimizer; saved in any layout, resumed and resharded into any other), the emergency checkpoint on preemption,
// heartbeats and commits for tenax-launch (tenax/worker.hpp), per-step phase metrics (tenax/metrics.hpp) and the
// layout-independent parameter checksum.
//
// Batches: step s (1-based) consumes global samples [(s-1) G, s G) of the batch source, G = global_batch; data-parallel
// rank r takes [(s-1) G + r G/dp, (s-1) G + (r+1) G/dp), cut into micro-batches of micro_batch sequences. The position
// is therefore a function of the step alone, which is what makes a resume exact in any layout and world size. The
// objective is the mean token loss over the global batch, so every layout optimises the same function: on the CPU, a
// run in any layout matches the single-rank run to rounding, and the same layout reproduces bit for bit.
//
// Collectives: the constructor, resume(), step(), evaluate(), generate(), parameters_checksum(), save() and run() are
// collective over the world: every rank calls them in the same order. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tenax/batch_source.hpp"
#include "tenax/communicator.hpp"
#include "tenax/data_parallel.hpp"
#include "tenax/layout.hpp"
#include "tenax/loss_scaler.hpp"
#include "tenax/module.hpp"
#include "tenax/optimizer.hpp"
#include "tenax/pipeline_program.hpp"
#include "tenax/precision.hpp"
#include "tenax/runtime.hpp"
#include "tenax/tensor.hpp"

namespace tenax {

// "cpu" or "cuda" (a program's --device); UsageError naming the choices otherwise.
Device parse_device(const std::string& text);

// What the model builder learns about the chunk it builds.
struct ChunkContext {
  int virtual_stage = 0;   // this chunk's position in the model, 0 .. virtual_stages - 1
  int virtual_stages = 1;  // pipeline stages x chunks per stage
  ParallelLayout layout;
  Communicator* tp = nullptr;  // the tensor-parallel group the chunk's modules use (NCCL on a GPU run)
  bool first() const { return virtual_stage == 0; }
  bool last() const { return virtual_stage == virtual_stages - 1; }
  // The blocks [begin, end) of a model of `blocks` blocks that this chunk holds: evenly, earlier chunks getting the
  // extra ones. last_chunk_extra > 0 is the work the last chunk does besides its blocks (an output head and loss), in
  // blocks: the last chunk then gets the number of blocks that makes the slowest chunk fastest (a pipeline step runs
  // at its slowest stage's pace). Throws UsageError when there are fewer blocks than chunks.
  std::pair<std::size_t, std::size_t> blocks(std::size_t blocks, double last_chunk_extra = 0.0) const;
};
// Builds one chunk's module (usually an nn::Sequential). Called once per chunk this rank holds, before any parameter
// exists; every tp rank of a chunk builds the same modules.
using ChunkBuilder = std::function<std::unique_ptr<nn::Module>(const ChunkContext&)>;

// The learning rate at a step: linear warm-up, then cosine decay to min_lr (or constant). 0 <= min_lr <= lr.
struct LearningRateSchedule {
  float lr = 3e-3f;
  float min_lr = 0.0f;
  long warmup_steps = 0;
  long decay_steps = 0;       // 0: constant after warm-up; otherwise cosine from lr to min_lr over these steps
  float at(long step) const;  // step is 1-based
};

struct CheckpointPolicy {
  std::string dir;  // "": TENAX_CHECKPOINT_DIR (tenax-launch sets it); "none" or "" with it unset: none
  int every = 0;    // save every N steps; 0: only at the end and on preemption
  // Automatic interval: once each save is committed (or at the next save, if that comes first), the interval that
  // loses the least expected time (Young/Daly, from the slowest rank's blocking time of that save: its call and the
  // progress calls until then; the mean step time since the previous choice and the MTBF) replaces `every`, which is
  // the interval until the first save (50 when 0). The choice and its inputs are logged and in the run's summary. A
  // save due while the previous one is still being written or committed is taken once that one has committed (at
  // most one interval later), instead of blocking training on it.
  bool automatic = false;
  // The MTBF it assumes; 0: this run's own (TENAX_RUN_MTBF, from tenax-launch) once it failed, else TENAX_MTBF when
  // set, else the site's TENAX_NODE_MTBF over the nodes the run spans, else TENAX_MTBF's default (24 h). Beside a
  // node-local tier that saves at least as often, the shared tier's own figure once it failed is TENAX_RUN_SHARED_MTBF
  // (the failures whose restart needed the shared tier); a value here applies to both tiers.
  double mtbf_s = 0;

  // A command line's --checkpoint-every: "N" (N >= 0) sets `every`, "auto" sets `automatic` (`every` stays the
  // interval until the first save). Returns `policy` so changed; UsageError naming the text otherwise.
  static CheckpointPolicy parse_every(std::string_view text, CheckpointPolicy policy);
  // The default a program gives its --checkpoint-every: TENAX_CKPT_EVERY when set (by the SPANK plugin's
  // --tenax-ckpt-every, or by the user), else `built_in`; so an option the program's command line names still wins.
  // Checked by parse_every, whose UsageError then names the variable.
  static std::string every_default(std::string_view built_in);
  int keep = 0;  // complete checkpoints kept; 0: TENAX_CKPT_KEEP
  // The node-local tier (tenax/checkpoint.hpp, CheckpointOptions::local_dir): "" takes TENAX_CKPT_LOCAL_DIR, "none" or
  // "" with it unset: no tier. Every save then also keeps each rank's own copy there, and a restart on the same nodes
  // reads it instead of the shared directory. `local_every` > 0 adds node-local-only saves every N steps between the
  // shared ones (cheap: no shared write, no commit agreement). `local_automatic` chooses that interval as `automatic`
  // does the shared one, from the blocking time of the node-local saves and of the progress calls that agree on and
  // send each (measured from the first saves, right after steps 1 and 2): the Young/Daly interval of the tier most
  // restarts resume from. The shared tier keeps its own interval (automatic or not): a requeue, a lost node with its
  // partner or a layout change resumes from it.
  std::string local_dir;
  int local_every = 0;
  bool local_automatic = false;
  // A command line's --checkpoint-local-every: "N" (N >= 0) sets `local_every`, "auto" sets `local_automatic`.
  static CheckpointPolicy parse_local_every(std::string_view text, CheckpointPolicy policy);
  // The same for --checkpoint-local-every: TENAX_CKPT_LOCAL_EVERY (--tenax-ckpt-local-every) when set.
  static std::string local_every_default(std::string_view built_in);
  int max_failures = 3;  // periodic saves that may fail in a row (each a warning) before the run stops
};

// Validation during run(): after every `every`-th step and after the last one, the mean token loss over the first
// `samples` samples of `source` (the same samples each time, so the curve compares like with like; forward only).
struct ValidationPolicy {
  std::shared_ptr<const BatchSource> source;  // null: no validation
  int every = 0;                              // 0: only after the last step
  // Rounded up to a multiple of global_batch, so that every layout evaluates the same samples.
  std::size_t samples = 0;
};

struct EngineConfig {
  std::optional<ParallelLayout> layout;  // unset: TENAX_LAYOUT, else every rank data-parallel
  PipelineKind schedule = PipelineKind::OneFOneB;
  int virtual_stages = 1;  // model chunks per pipeline stage (interleaved schedule)
  PrecisionPolicy precision;
  Device device = Device::Host;  // Cuda: one GPU per rank (node-local rank mod the GPUs it sees), NCCL groups
  int global_batch = 16;         // sequences per step, all data-parallel ranks together
  int micro_batch = 4;           // sequences per micro-batch
  std::size_t seq_len = 32;
  std::uint64_t seed = 1234;  // weights (and nothing else: the batch source has its own)
  long steps = 100;           // run(): train until this step (counting steps before a resume)
  OptimizerConfig optimizer;  // its `lr` fields are not used: the rate of every step comes from `lr` below
  LearningRateSchedule lr;
  float grad_clip = 0.0f;  // clip the global gradient norm to this (0: no clipping)
  LossScalerConfig loss_scaler;
  DataParallelConfig data_parallel;
  CheckpointPolicy checkpoint;
  ValidationPolicy validation;
  std::string run_dir;     // metrics outputs; "": TENAX_RUN_DIR
  int loader_workers = 0;  // data loader threads; 0: TENAX_LOADER_WORKERS
  // What the model's parameters mean beyond their names and shapes, e.g. models::GptConfig::description() (the number
  // of attention heads, tied embeddings): saved with every checkpoint; a resume from one saved with another
  // description is a UsageError, since the same weights would be read as another model. "": nothing checked.
  std::string model_description;
};

struct StepResult {
  long step = 0;         // 1-based
  double loss = 0;       // mean token loss of the global batch (the same on every rank)
  bool skipped = false;  // fp16 overflow: no update
  float loss_scale = 1;
  float lr = 0;
  double grad_norm = 0;                   // global gradient norm before clipping (when clipping is on; else 0)
  double seconds = 0;                     // wall time of the step on this rank
  std::size_t tokens = 0;                 // tokens in the global batch
  std::size_t buckets_reduced_early = 0;  // gradient buckets whose reduction started while backward still ran
  std::optional<double> validation_loss;  // run(): set after the steps that ValidationPolicy validates
};

struct ResumeInfo {
  bool resumed = false;
  long step = 0;  // the step training continues after
  std::string path;
  ParallelLayout saved_layout;
  int saved_world_size = 0;
  double seconds = 0;
  std::vector<std::string> rejected;  // newer checkpoints skipped as damaged, with the reason
  bool node_local = false;            // every rank read the node-local tier (its own copy or its partner's)
};

// Called by run() after every step on every rank (print from rank 0: engine.rank() == 0).
using StepCallback = std::function<void(const StepResult&)>;

class Engine {
 public:
  // Collective. Validates the configuration against the world (UsageError naming the fix on every rank), splits the
  // world into the layout's groups, builds this rank's chunks and the parameter buffers, initialises the weights from
  // the seed, and, with a checkpoint directory, checks that it can hold checkpoints (tenax/checkpoint.hpp).
  // `world` is a host (MPI) communicator: Runtime::world(), or a split of it, which must outlive the engine.
  // Every rank must pass the same config (but run_dir, loader_workers and the validation source's object) and build
  // the same model: a field that differs between ranks, or data-parallel replicas whose parameters differ, is a
  // UsageError on every rank naming them.
  Engine(Communicator& world, EngineConfig config, ChunkBuilder build, std::shared_ptr<const BatchSource> data);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Loads the newest valid checkpoint (any saved layout) and continues from its step; a fresh start without one.
  ResumeInfo resume();
  // One optimizer step over the next global batch.
  StepResult step();
  // The mean token loss over `samples` samples of `source` starting at `first` (forward only, no update). samples
  // must be a multiple of micro_batch x dp.
  double evaluate(const BatchSource& source, std::uint64_t first, std::size_t samples);
  // Extends `prompt` by `tokens` tokens sampled from the model (temperature 0: greedy), seeded; the same on every
  // rank. The context is the last seq_len tokens. At most 2^20 tokens (UsageError beyond); once SIGTERM or SIGUSR1
  // arrived on any rank it stops early, with a warning, and returns the tokens so far (the signals are recorded once
  // the preemption handlers are installed: by run(), or by worker::install_preemption_handlers()).
  std::vector<std::int32_t> generate(std::vector<std::int32_t> prompt, std::size_t tokens, float temperature,
                                     std::uint64_t seed);
  // generate()'s checks of its arguments, for a program to run before training rather than after it. UsageError.
  static void check_generation(std::size_t tokens, float temperature);
  // Starts a checkpoint of the current step (asynchronous; committed during later steps) / waits for it. save() may
  // raise an earlier checkpoint's IoError once its own checkpoint is under way (Checkpointer::save).
  void save();
  void wait_for_checkpoint();
  // The whole fault-tolerant run: resume, train until config.steps with periodic checkpoints and validation, stop with
  // an emergency checkpoint on SIGTERM/SIGUSR1 (exit kExitPreempted), final checkpoint, summary. Each step's loss,
  // tokens and validation loss also go to <run_dir>/metrics/training.jsonl (tenax-report draws them). Heartbeats and
  // commits go to tenax-launch. World rank 0 prints the milestones on stdout ("resumed from <dir>/step_<N> at step <N>
  // (saved with layout ... on R ranks)", "preempted: emergency checkpoint of step <N> committed") and the metrics
  // summary on stderr. Returns the exit code for main() (exceptions propagate, after the exit record was written).
  int run(const StepCallback& on_step = {});

  // Layout-independent checksum of every parameter's global values (tenax/model_state.hpp).
  std::uint64_t parameters_checksum();
  long current_step() const;
  int rank() const;
  const ParallelLayout& layout() const;
  const EngineConfig& config() const;
  // The phases of the last finished run (or "" before one); also printed by run() on stderr.
  std::string summary() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tenax
