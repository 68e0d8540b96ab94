#include "training_checkpoint.hpp"

#include <chrono>
#include <utility>

#include "tenax/error.hpp"
#include "tenax/log.hpp"

namespace tenax::examples {
namespace {

CheckpointOptions options_of(const CheckpointSettings& s, const Trainer& trainer) {
  CheckpointOptions o;
  o.dir = s.dir;
  o.keep = s.keep;
  o.layout = trainer.layout();
  o.cuda_stream = trainer.context().stream();  // orders copies of device entries (if any) with the training kernels
  return o;
}

}  // namespace

TrainingCheckpoint::TrainingCheckpoint(Communicator& world, Trainer& trainer, CheckpointSettings settings)
    : world_(world), trainer_(trainer), settings_(std::move(settings)) {
  if (settings_.dir.empty())
    throw UsageError("checkpoint: no directory; pass --checkpoint-dir or set TENAX_CHECKPOINT_DIR");
  if (settings_.every < 0) throw UsageError("checkpoint: --checkpoint-every must be >= 0 (0: no periodic saves)");
  if (settings_.keep < 1) throw UsageError("checkpoint: --keep must be >= 1 (the newest checkpoint is always kept)");
  if (settings_.max_failures < 1)
    throw UsageError("checkpoint: --max-checkpoint-failures must be >= 1 (consecutive failed saves before stopping)");
  writer_ = std::make_unique<Checkpointer>(world_, options_of(settings_, trainer_),
                                           checkpoint_shards(trainer_.state_entries(), /*primary_only=*/true));
}

TrainingCheckpoint::~TrainingCheckpoint() = default;

ResumeResult TrainingCheckpoint::resume() {
  const auto start = std::chrono::steady_clock::now();
  ResumeResult out;
  // Every replica must receive the saved values, not only the primary holders: load through all entries.
  CheckpointOptions reading = options_of(settings_, trainer_);
  reading.read_only = true;  // the writer already checked and cleaned the directory
  Checkpointer reader(world_, reading, checkpoint_shards(trainer_.state_entries(), /*primary_only=*/false));
  LoadResult r = reader.load();
  out.rejected = r.rejected;
  if (!r.loaded) return out;
  TrainingProgress p;
  p.step = get_value<long>(r.blobs, "progress.step");
  p.optimizer_steps = get_value<long>(r.blobs, "progress.optimizer_steps");
  p.data_position = get_value<std::uint64_t>(r.blobs, "progress.data_position");
  p.seed = get_value<std::uint64_t>(r.blobs, "progress.seed");
  p.loss_scaler = get_value<DynamicLossScaler::State>(r.blobs, "progress.loss_scaler");
  if (static_cast<std::uint64_t>(p.step) != r.step)
    throw IoError("checkpoint " + r.path + " is for step " + std::to_string(r.step) + " but its progress blob says " +
                  std::to_string(p.step) + "; remove the directory or point --checkpoint-dir elsewhere");
  trainer_.restore(p);
  last_saved_ = p.step;
  reported_commit_ = p.step;
  out.resumed = true;
  out.step = p.step;
  out.path = r.path;
  out.saved_layout = r.saved_layout;
  out.saved_world_size = r.saved_world_size;
  out.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

Blobs TrainingCheckpoint::progress_blobs() const {
  const TrainingProgress p = trainer_.progress();
  Blobs b;
  put_value(b, "progress.step", p.step);
  put_value(b, "progress.optimizer_steps", p.optimizer_steps);
  put_value(b, "progress.data_position", p.data_position);
  put_value(b, "progress.seed", p.seed);
  put_value(b, "progress.loss_scaler", p.loss_scaler);
  return b;
}

void TrainingCheckpoint::after_step(long step) {
  // Every rank raises the same IoError at the same call (the checkpointer agrees on outcomes), so every rank takes the
  // same branch here.
  try {
    if (settings_.every > 0 && step % settings_.every == 0 && last_saved_ != step) {
      last_saved_ = step;
      writer_->save(static_cast<std::uint64_t>(step), progress_blobs());
    }
    writer_->progress();
  } catch (const IoError& error) {
    ++consecutive_failures_;
    if (consecutive_failures_ >= settings_.max_failures)
      throw IoError("checkpoint: " + std::to_string(consecutive_failures_) +
                    " checkpoint saves in a row failed (--max-checkpoint-failures " +
                    std::to_string(settings_.max_failures) + "); the last: " + error.what());
    if (world_.rank() == 0)
      TENAX_LOG(Warn, "example") << "a checkpoint failed; training goes on and the next save (step "
                                 << (settings_.every > 0 ? (step / settings_.every + 1) * settings_.every : step)
                                 << ") tries again (" << consecutive_failures_ << " of " << settings_.max_failures
                                 << " failures in a row allowed): " << error.what();
  }
  const std::optional<std::uint64_t> committed = writer_->last_committed_step();
  if (committed && committed != last_commit_seen_) {
    last_commit_seen_ = committed;
    consecutive_failures_ = 0;
  }
}

std::optional<long> TrainingCheckpoint::take_new_commit() {
  const std::optional<std::uint64_t> committed = writer_->last_committed_step();
  if (!committed || (reported_commit_ && static_cast<long>(*committed) == *reported_commit_)) return std::nullopt;
  reported_commit_ = static_cast<long>(*committed);
  return reported_commit_;
}

void TrainingCheckpoint::emergency_save(long step) {
  writer_->wait();
  // The step may already be saved (a periodic save of this very step): a checkpoint is never written twice.
  if (last_saved_ == step) return;
  writer_->emergency_save(static_cast<std::uint64_t>(step), progress_blobs());
  last_saved_ = step;
}

void TrainingCheckpoint::finish(long step) {
  if (last_saved_ != step) {
    writer_->save(static_cast<std::uint64_t>(step), progress_blobs());
    last_saved_ = step;
  }
  writer_->wait();
}

}  // namespace tenax::examples
