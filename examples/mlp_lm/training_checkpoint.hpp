// Checkpointing of the example's training state through tenax::Checkpointer (docs/checkpoint-format.md): every
// parameter, fp32 master weight and optimizer moment (Trainer::state_entries()) as tensor blocks, and the progress
// (step, optimizer steps, data position, seed, loss-scaler state) as per-rank blobs.
//
// Writing uses only the `primary` entries, so each replicated element (data-parallel replicas, tensors every TP rank
// holds whole) has one writer. Loading must fill every replica, so the resume uses a second, short-lived checkpointer
// over all entries; ZeRO-1 optimizer shards are passed as their boxes (several blocks of a tensor per rank); the
// checkpointer reads for each rank only the blocks it overlaps, whatever layout and world size saved them (dp 4 -> 2,
// tp 2 -> 1, ZeRO-1 on or off).
//
// Every member is collective over the world communicator given to the constructor.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint_shards.hpp"
#include "tenax/checkpoint.hpp"
#include "tenax/communicator.hpp"
#include "trainer.hpp"

namespace tenax::examples {

struct CheckpointSettings {
  std::string dir;       // "" disables checkpointing
  int every = 0;         // save every N steps (0: only the final and emergency checkpoints)
  int keep = 3;          // complete checkpoints kept
  int max_failures = 3;  // consecutive failed periodic saves tolerated before the run stops (>= 1)
};

struct ResumeResult {
  bool resumed = false;
  long step = 0;  // the step training continues after (0: fresh start)
  double load_seconds = 0;
  std::string path;
  ParallelLayout saved_layout;
  int saved_world_size = 0;
  std::vector<std::string> rejected;  // newer checkpoints skipped because a shard was missing, truncated or corrupt
};

class TrainingCheckpoint {
 public:
  // Collective. Throws UsageError for bad settings.
  TrainingCheckpoint(Communicator& world, Trainer& trainer, CheckpointSettings settings);
  ~TrainingCheckpoint();
  TrainingCheckpoint(const TrainingCheckpoint&) = delete;
  TrainingCheckpoint& operator=(const TrainingCheckpoint&) = delete;

  // Loads the newest valid checkpoint (falling back past corrupt ones) into the trainer and restores its progress.
  ResumeResult resume();
  // After step `step`: starts an asynchronous save when the step is due, and commits finished checkpoints. A failed
  // periodic save (a full disk, a failing file server) is a warning and training goes on: the next due step saves
  // again, and progress since the newest committed checkpoint is at risk meanwhile. After max_failures consecutive
  // failures it throws IoError naming the last one.
  void after_step(long step);
  // The newest committed step if it changed since the previous call (for the launcher's heartbeats).
  std::optional<long> take_new_commit();
  // Synchronous: the preemption path. On return the checkpoint of `step` is durable on every rank.
  void emergency_save(long step);
  // End of training: saves `step` unless already saved, and waits for it to be durable.
  void finish(long step);

 private:
  Blobs progress_blobs() const;

  Communicator& world_;
  Trainer& trainer_;
  CheckpointSettings settings_;
  std::unique_ptr<Checkpointer> writer_;
  std::optional<long> last_saved_;
  std::optional<long> reported_commit_;
  int consecutive_failures_ = 0;
  std::optional<std::uint64_t> last_commit_seen_;
};

}  // namespace tenax::examples
