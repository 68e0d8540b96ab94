// The Checkpointer: set-up, and saving as the training thread sees it (staging, handing the write to the I/O threads,
// raising failures); the shared write and its commit are in shared_write.cpp, the in-flight bookkeeping in
// in_flight.cpp.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "checkpoint/checkpointer_state.hpp"
#include "checkpoint/commit.hpp"
#include "checkpoint/crc32c.hpp"
#include "checkpoint/dir_probe.hpp"
#include "checkpoint/local_tier.hpp"
#include "checkpoint/local_tier_cleanup.hpp"
#include "checkpoint/names.hpp"
#include "checkpoint/shard_file.hpp"
#include "core/file_system.hpp"
#include "core/host_memory.hpp"
#include "tenax/env.hpp"
#include "tenax/log.hpp"

namespace tenax {

TensorShard TensorShard::whole(std::string name, DType dtype, std::vector<std::uint64_t> shape, void* data) {
  return TensorShard{std::move(name), dtype, std::move(shape), {}, {}, data, MemoryKind::Host};
}

TensorShard TensorShard::block(std::string name, DType dtype, std::vector<std::uint64_t> global_shape,
                               std::vector<std::uint64_t> offset, std::vector<std::uint64_t> shape, void* data) {
  return TensorShard{std::move(name),  dtype, std::move(global_shape), std::move(offset),
                     std::move(shape), data,  MemoryKind::Host};
}

TensorShard TensorShard::flat_range(std::string name, DType dtype, std::uint64_t total, std::uint64_t begin,
                                    std::uint64_t count, void* data) {
  return TensorShard{std::move(name), dtype, {total}, {begin}, {count}, data, MemoryKind::Host};
}

std::uint64_t TensorShard::elements() const {
  return ckpt::volume(shape.empty() ? global_shape : shape);
}

CheckpointOptions CheckpointOptions::from_env(const ParallelLayout& layout) {
  CheckpointOptions o = tuning_from_env();
  o.dir = env::get_string("TENAX_CHECKPOINT_DIR");
  if (o.dir.empty())
    throw UsageError("TENAX_CHECKPOINT_DIR is not set: set it to the directory where checkpoints are written and read");
  o.layout = layout;
  return o;
}

CheckpointOptions CheckpointOptions::tuning_from_env() {
  CheckpointOptions o;
  o.keep = static_cast<int>(env::get_int("TENAX_CKPT_KEEP"));
  o.io_nice = static_cast<int>(env::get_int("TENAX_CKPT_IO_NICE"));
  o.direct_io = env::get_bool("TENAX_CKPT_DIRECT_IO");
  o.staging_threads = static_cast<int>(env::get_int("TENAX_CKPT_STAGING_THREADS"));
  o.staging_kernel = env::get_string("TENAX_CKPT_STAGING_KERNEL");
  o.local_dir = env::get_string("TENAX_CKPT_LOCAL_DIR");
  if (o.local_dir == "none") o.local_dir.clear();  // as the engine and the SPANK plugin read it: no node-local tier
  o.local_keep = static_cast<int>(env::get_int("TENAX_CKPT_LOCAL_KEEP"));
  return o;
}

std::vector<CheckpointInfo> list_checkpoints(const std::string& dir) {
  return ckpt::complete_checkpoints(dir);
}

namespace {

std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

}  // namespace

Checkpointer::Checkpointer(Communicator& world, CheckpointOptions options, std::vector<TensorShard> shards,
                           std::vector<TensorShard> local_shards)
    : state_(std::make_unique<State>(world, std::move(options))) {
  State& s = *state_;
  const bool local_tier = !s.options.local_dir.empty();
  const bool local_shards_given = !local_shards.empty();
  if (local_tier && !local_shards_given) local_shards = shards;
  run_agreed(world, [&] {
    if (s.options.dir.empty())
      throw UsageError("checkpoint: no directory given (set CheckpointOptions::dir or TENAX_CHECKPOINT_DIR)");
    // Node-local storage is each node's own: a relative path would resolve against every rank's working directory
    // (a shared one, often), and blanks are a typing slip that made a folder named " ".
    if (local_tier && s.options.local_dir.front() != '/')
      throw UsageError("checkpoint: the node-local checkpoint directory '" + s.options.local_dir +
                       "' is not an absolute path; give one on the node's own storage, e.g. /dev/shm/tenax-$USER "
                       "(TENAX_CKPT_LOCAL_DIR, CheckpointOptions::local_dir), or leave it unset");
    if (s.options.keep < 1)
      throw UsageError("checkpoint: keep = " + std::to_string(s.options.keep) +
                       " would delete the newest checkpoint; keep at least 1 (TENAX_CKPT_KEEP)");
    if (s.options.io_nice < 0 || s.options.io_nice > 19)
      throw UsageError("checkpoint: io_nice = " + std::to_string(s.options.io_nice) +
                       " is not a niceness a thread can give itself; use 0..19 (TENAX_CKPT_IO_NICE)");
    if (s.options.staging_threads < 0 || s.options.staging_threads > 256)
      throw UsageError("checkpoint: staging_threads = " + std::to_string(s.options.staging_threads) +
                       " is out of range; use 1..256 threads, or 0 to size it to the rank's CPUs "
                       "(TENAX_CKPT_STAGING_THREADS)");
    if (!s.options.read_only && !ckpt::crc32c_find_copy_kernel(s.options.staging_kernel))
      throw UsageError("checkpoint: staging_kernel = '" + s.options.staging_kernel +
                       "' is not a copy kernel this CPU has; name one of " + ckpt::crc32c_copy_kernel_names() +
                       ", or auto for the fastest (TENAX_CKPT_STAGING_KERNEL)");
    if (local_tier && s.options.local_keep < 1)
      throw UsageError("checkpoint: local_keep = " + std::to_string(s.options.local_keep) +
                       " keeps no node-local copy; keep at least 1 (TENAX_CKPT_LOCAL_KEEP)");
    ckpt::normalize_shards(shards);
    if (local_tier) ckpt::normalize_shards(local_shards);
    auto on_device = [](const TensorShard& t) { return t.memory == MemoryKind::Device; };
    const bool device_shards = std::any_of(shards.begin(), shards.end(), on_device) ||
                               std::any_of(local_shards.begin(), local_shards.end(), on_device);
    // Without the producer's stream the copies would run on the legacy stream, unordered with kernels on a
    // non-blocking stream: a torn or stale checkpoint, or a load overwritten by pending work.
    if (device_shards && s.options.cuda_stream == nullptr)
      throw UsageError(
          "checkpoint: device-memory shards need CheckpointOptions::cuda_stream (the cudaStream_t whose "
          "kernels produce them) so that copies are ordered with that work");
    if (device_shards) s.cuda_device = ckpt::current_device();
  });
  s.shards = std::move(shards);
  const std::vector<std::string> descriptions = all_gather_strings(world, ckpt::describe_shards(s.shards));
  s.plan = ckpt::make_plan(descriptions);

  std::size_t offset = 0;
  if (local_tier && !s.options.read_only) {
    for (const TensorShard& t : local_shards) {
      s.local_offsets.push_back(offset);
      offset = round_up(offset + t.bytes(), 4096);
      if (t.memory == MemoryKind::Device) s.any_device = true;
    }
    s.local_crcs.resize(local_shards.size());
    s.local_staging_bytes = offset;
  }
  for (int b = 0; b < static_cast<int>(s.plan.blocks.size()); ++b) {
    const auto& block = s.plan.blocks[b];
    if (block.writer != world.rank()) continue;
    const std::string& name = s.plan.tensors[block.tensor].name;
    int shard = 0;  // the writer holds exactly this block (it may hold other blocks of the tensor too)
    while (s.shards[shard].name != name || s.shards[shard].offset != block.box.offset ||
           s.shards[shard].shape != block.box.shape)
      ++shard;
    std::size_t bytes = s.shards[shard].bytes();
    int local = -1;  // a node-local shard that is this very block shares its staged copy
    for (int i = 0; i < static_cast<int>(s.local_offsets.size()) && local < 0; ++i)
      if (local_shards[i].name == name && local_shards[i].offset == block.box.offset &&
          local_shards[i].shape == block.box.shape && local_shards[i].dtype == s.shards[shard].dtype)
        local = i;
    if (local >= 0) {
      s.writes.push_back(State::LocalWrite{shard, b, s.local_offsets[local], bytes, local});
    } else {
      s.writes.push_back(State::LocalWrite{shard, b, offset, bytes, -1});
      offset = round_up(offset + bytes, 4096);
    }
    if (s.shards[shard].memory == MemoryKind::Device) s.any_device = true;
  }
  s.staged_crcs.resize(s.writes.size());

  if (!s.options.read_only) {
    // Before any training is spent: a directory this job cannot write, that is not one directory shared by every
    // rank, or that another run saves into, is a usage error now rather than a failed first save or a failed restart.
    s.dir_lock = ckpt::probe_checkpoint_dir(world, s.options.dir);
  }
  if (local_tier) {
    // The key scopes the copies to this run of this model (local_tier.hpp). A loading-only checkpointer of a run that
    // never saved finds no run id, hence no copies.
    // The key covers what the copies hold; when that is the shards themselves (a loading checkpointer), their
    // descriptions are already gathered.
    const std::vector<std::string> local_descriptions =
        local_shards_given ? all_gather_strings(world, ckpt::describe_shards(local_shards)) : descriptions;
    std::string run_id;
    run_agreed(world, [&] {
      if (world.rank() != 0) return;
      if (!s.options.read_only) fs::make_dirs(s.options.dir);
      run_id = s.options.read_only ? ckpt::read_run_id(s.options.dir) : ckpt::create_run_id(s.options.dir);
    });
    run_id = broadcast_string(world, run_id, 0);
    const std::string node = ckpt::node_name(s.options);
    const std::string domain =
        !s.options.failure_domain.empty()
            ? s.options.failure_domain
            : ckpt::leaf_switch(std::getenv("SLURM_TOPOLOGY_ADDR"), std::getenv("SLURM_TOPOLOGY_ADDR_PATTERN"));
    s.partner_of = ckpt::partner_ranks(all_gather_strings(world, node), all_gather_strings(world, domain));
    s.partner_to = s.partner_of[world.rank()];
    for (int r = 0; r < world.size(); ++r)
      if (s.partner_of[r] == world.rank()) s.partner_from.push_back(r);
    if (!run_id.empty()) {
      s.local_key = ckpt::local_tier_key(s.options.dir, run_id, world.size(), local_descriptions);
      s.local_base = ckpt::expand_node(s.options.local_dir, node);
      s.local_root = ckpt::local_rank_root(s.local_base, s.local_key, world.rank());
    }
    s.local_shards = std::move(local_shards);
    if (s.options.read_only && !s.local_root.empty()) {
      // A reader of the job also keeps the job's end from removing the copies under its load, where they exist.
      std::string job;
      try {
        job = ckpt::local_copies_job();
      } catch (const UsageError&) {
        // A job id no tier folder can hold names no folder this reader could be the job's of: nothing to hold.
      }
      const int held = ckpt::hold_existing_local_tier_folder(fs::parent_of(s.local_root), job);
      const int error = errno;
      s.local_in_use.reset(held);
      if (held < 0 && error == EPERM)
        TENAX_LOG(Debug, "ckpt") << "rank " << world.rank() << ": " << fs::parent_of(s.local_root)
                                 << " does not name this job (" << (job.empty() ? "none known" : job)
                                 << "): this reader does not hold it";
      if (held < 0 && error != ENOENT && error != EPERM)
        TENAX_LOG(Info, "ckpt") << "rank " << world.rank() << ": could not mark " << fs::parent_of(s.local_root)
                                << " as in use (" << std::strerror(error)
                                << "): a job ending on this node meanwhile could remove the copies this reader loads";
    }
    if (!s.options.read_only && !s.local_root.empty()) {
      run_agreed(world, [&] {
        const std::string job = ckpt::local_copies_job();
        try {
          // First the lock: while this rank lives, no job's end removes the folder (another component of a
          // heterogeneous job on this node may end first), and a removal under way finishes before anything is
          // written.
          const std::string folder = fs::parent_of(s.local_root);
          fs::make_dirs(s.local_base);
          s.hold_local_folder(folder);
          fs::make_dirs(s.local_root);
          ckpt::remove_local_leftovers(s.local_root);
          // Renewed by every attempt, so that the end of the job that uses the copies now removes them.
          if (!job.empty())
            fs::replace_file_atomically(fs::join(folder, ckpt::kLocalTierJobFile), job + "\n", fs::Durability::None);
        } catch (const std::exception& e) {
          // run_agreed names the first rank that failed, on every rank.
          throw UsageError("the node-local checkpoint directory " + s.options.local_dir +
                           " cannot hold copies: " + e.what() +
                           "; point TENAX_CKPT_LOCAL_DIR at a writable directory on the node's own storage, or "
                           "unset it");
        }
      });
    }
  }
  run_agreed(world, [&] {
    if (world.rank() == 0 && !s.options.read_only) ckpt::remove_leftovers(s.options.dir);
    s.arena.allocate(s.options.read_only ? 0 : offset, s.any_device);
    if (s.any_device) s.fence = std::make_unique<ckpt::DeviceCopyFence>();
    if (s.any_device && !s.local_root.empty()) s.local_fence = std::make_unique<ckpt::DeviceCopyFence>();
  });
  if (!s.local_root.empty() && !s.options.read_only) {
    // The node-local copies' own staging memory is mapped later (local_arena_ready), when no host memory limit is in
    // force any more: under the engine's (core/host_memory.hpp) it is tried now, every rank's charge held until all
    // have answered (a node's ranks share one budget), and where it would not fit the node-local saves wait for the
    // shared write in flight instead, as when mapping it fails. Every rank takes part, one without local shards too.
    bool fits = true;
    try {
      detail::charge_host_memory(s.local_staging_bytes);
    } catch (const UsageError& e) {
      fits = false;
      TENAX_LOG(Warn, "ckpt") << "no staging memory of their own for node-local copies: " << e.what();
    }
    const bool every_fits = every_rank(world, fits);
    if (fits) detail::release_host_memory(s.local_staging_bytes);
    if (!every_fits) s.local_arena_state = State::LocalArena::Refused;
  }
  s.io = std::make_unique<ckpt::IoThread>(s.options.io_nice, "tenax-ckpt-io");
  if (!s.local_root.empty() && !s.options.read_only)
    s.local_io = std::make_unique<ckpt::IoThread>(s.options.io_nice, "tenax-ckpt-loc");
  if (!s.options.read_only) {
    // Gathered on every rank whatever its option, so that the collectives stay in step; ranks that share CPUs share
    // them among their staging passes.
    const std::vector<std::string> placements = all_gather_strings(world, ckpt::cpu_placement());
    run_agreed(world, [&] {
      const int threads = s.options.staging_threads > 0 ? s.options.staging_threads
                                                        : ckpt::automatic_staging_threads(placements, world.rank());
      s.staging =
          std::make_unique<ckpt::StagingPass>(threads, *ckpt::crc32c_find_copy_kernel(s.options.staging_kernel));
    });
  }
  if (world.rank() == 0) {
    env::warn_if_unexpanded("the checkpoint directory", s.options.dir);
    env::warn_if_unexpanded("the node-local checkpoint directory", s.options.local_dir);
  }
  TENAX_LOG(Info, "ckpt") << "checkpointer on " << s.options.dir << ": " << s.plan.tensors.size() << " tensors, "
                          << s.writes.size() << " blocks and " << offset << " staging bytes on this rank"
                          << (s.staging ? ", copied by " + std::to_string(s.staging->threads()) + " threads (" +
                                              s.staging->kernel().name + ")"
                                        : "");
}

Checkpointer::~Checkpointer() {
  if (state_->writing) {
    TENAX_LOG(Warn, "ckpt")
        << "checkpoint step " << *state_->writing
        << " was still being written and is not committed: call wait() (Engine::wait_for_checkpoint()) before the "
           "checkpointer (the Engine) goes away";
  }
  if (state_->partner && state_->partner->started && !state_->partner->work.is_completed()) {
    // Transfers still posted read and write these buffers: leave them to the process rather than free them under
    // the network (wait() finishes the exchange; only a checkpointer dropped without it gets here).
    TENAX_LOG(Warn, "ckpt")
        << "the partner copy of step " << state_->partner->step
        << " was still in transfer: call wait() (Engine::wait_for_checkpoint()) before the checkpointer goes away";
    new State::PartnerExchange(std::move(*state_->partner));  // NOLINT: deliberately kept
  }
  state_->io.reset();  // finishes queued jobs, including a commit every rank already agreed to
  state_->local_io.reset();
}

namespace {

// The IoError `settle` raised, returned rather than thrown: the failure of an earlier checkpoint that drain_poll() or
// finish_write() settles (their state is consistent either way), for a call that starts its own checkpoint before it
// raises the earlier one's failure.
template <class Settle>
std::optional<IoError> io_failure_of(Settle settle) {
  try {
    settle();
  } catch (const IoError& error) {
    return error;
  }
  return std::nullopt;
}

void check_blobs(const Blobs& blobs) {
  for (const auto& [name, bytes] : blobs)
    if (auto problem = ckpt::blob_name_problem(name))
      throw UsageError("checkpoint blob name '" + name + "' " + *problem +
                       " (blob names are non-empty, without '/', spaces or control characters)");
}

}  // namespace

void Checkpointer::State::stage(bool shared, std::uint8_t* local_dst) {
  // Host shards go to the staging pass together (it spreads them over its threads); device shards are enqueued on the
  // producer's stream, their CRCs taken on the I/O thread once the copies are done.
  std::vector<ckpt::StagingCopy> host;
  auto copy = [&](std::uint8_t* dst, const TensorShard& shard, std::size_t bytes, std::uint32_t* crc) {
    if (shard.memory == MemoryKind::Device) {
      ckpt::copy_device_to_host_async(dst, shard.data, bytes, options.cuda_stream);
      *crc = 0;
    } else {
      host.push_back(ckpt::StagingCopy{dst, static_cast<const std::uint8_t*>(shard.data), bytes, crc});
    }
  };
  for (std::size_t i = 0; i < local_offsets.size(); ++i)
    copy(local_dst + local_offsets[i], local_shards[i], local_shards[i].bytes(), &local_crcs[i]);
  if (shared)
    for (std::size_t i = 0; i < writes.size(); ++i)
      if (writes[i].local < 0)
        copy(arena.data() + writes[i].offset, shards[writes[i].shard], writes[i].bytes, &staged_crcs[i]);
  staging->run(host);
  if (shared)
    for (std::size_t i = 0; i < writes.size(); ++i)
      if (writes[i].local >= 0) staged_crcs[i] = local_crcs[writes[i].local];
  if (local_fence) local_fence->record(options.cuda_stream);
  if (shared && fence) fence->record(options.cuda_stream);
}

void Checkpointer::save(std::uint64_t step, const Blobs& blobs) {
  State& s = *state_;
  // At most one checkpoint in flight. A failure of the previous one is raised only once this one is under way: a
  // failed write (a full disk, a file server's hiccup) must not cost the next checkpoint too. Every rank learns of it
  // at the same call (its settling agrees), so every rank goes on alike.
  std::optional<IoError> previous_failure = io_failure_of([&] { s.drain_poll(); });
  if (!previous_failure && s.writing) previous_failure = io_failure_of([&] { s.finish_write(); });
  s.settle_local();  // its staging memory is about to be reused; one partner exchange at a time
  // Inside an agreement: a rank whose blobs are refused, or whose copy fails, must not leave the others to go on
  // into the next collective alone. Blocking on purpose (docs/checkpoint-format.md, "Saving"): its wait is for the
  // slowest rank, which the next collective would wait for anyway, and its error belongs to this call.
  try {
    run_agreed(s.world, [&] {
      if (s.options.read_only)
        throw UsageError("checkpoint: save() on a read-only checkpointer (CheckpointOptions::read_only) of " +
                         s.options.dir);
      check_blobs(blobs);
      s.stage(true, s.arena.data());
    });
  } catch (const Error&) {
    if (previous_failure) TENAX_LOG(Warn, "ckpt") << "before this save failed: " << previous_failure->what();
    throw;
  }
  s.staged_blobs = blobs;
  if (!s.local_root.empty()) s.submit_local(step, s.arena.data(), blobs);  // what a restart on these nodes reads
  s.writing = step;
  s.write_done = s.io->submit([&s, step] { return s.write_job(step); });
  if (previous_failure) throw *previous_failure;
}

void Checkpointer::save_local(std::uint64_t step, const Blobs& blobs) {
  State& s = *state_;
  // A failure of the shared write that settling learns of is raised once this copy is under way, as in save().
  std::optional<IoError> previous_failure = io_failure_of([&] { s.drain_poll(); });
  s.settle_local();
  // The same on every rank (the options, which the constructor's collectives already require alike, and the agreed
  // run id), like `writing`.
  const bool tier = !s.options.read_only && !s.local_root.empty();
  // A shared write in flight still reads `arena`: the copy goes to memory of its own instead of waiting for that
  // write (on a slow shared directory, seconds), and its own I/O thread writes it meanwhile. Without memory of its
  // own it waits, as save() does, and raises a failure of that write once its own copy is under way.
  if (!previous_failure && tier && s.writing && !s.local_arena_ready())
    previous_failure = io_failure_of([&] { s.finish_write(); });
  std::uint8_t* dst = tier && s.writing ? s.local_arena.data() : s.arena.data();
  try {
    run_agreed(s.world, [&] {
      if (!tier)
        throw UsageError(
            "checkpoint: save_local() needs a writable checkpointer with a node-local directory "
            "(CheckpointOptions::local_dir, TENAX_CKPT_LOCAL_DIR)");
      check_blobs(blobs);
      s.stage(false, dst);
    });
  } catch (const Error&) {
    if (previous_failure) TENAX_LOG(Warn, "ckpt") << "before this save failed: " << previous_failure->what();
    throw;
  }
  s.submit_local(step, dst, blobs);
  if (previous_failure) throw *previous_failure;
}

bool Checkpointer::progress() {
  state_->poll_progress();
  return !in_flight();
}

void Checkpointer::wait() {
  State& s = *state_;
  s.settle_local();
  if (s.writing) s.finish_write();
  if (s.committing) s.finish_commit();
}

void Checkpointer::settle(std::uint64_t step) {
  std::optional<IoError> last_failure;
  while (in_flight()) {  // the same on every rank: `writing` and `committing` move only through agreements
    try {
      wait();
    } catch (const IoError& error) {
      last_failure = error;
      if (state_->world.rank() == 0) TENAX_LOG(Warn, "ckpt") << error.what();
    }
  }
  if (state_->last_committed == step) return;
  if (last_failure) throw *last_failure;
  throw IoError("checkpoint step " + std::to_string(step) + " was not committed (no save of it was under way)");
}

void Checkpointer::emergency_save(std::uint64_t step, const Blobs& blobs) {
  // An earlier checkpoint's failure does not stop this one: it is the one the next run resumes from.
  while (in_flight()) {
    try {
      wait();
    } catch (const IoError& error) {
      if (state_->world.rank() == 0)
        TENAX_LOG(Warn, "ckpt") << "an earlier checkpoint failed (" << error.what()
                                << "); the emergency checkpoint of step " << step << " is taken all the same";
    }
  }
  save(step, blobs);
  settle(step);
}

std::optional<std::uint64_t> Checkpointer::last_committed_step() const {
  return state_->last_committed;
}
std::optional<std::uint64_t> Checkpointer::last_local_step() const {
  return state_->last_local_everywhere;
}
bool Checkpointer::in_flight() const {
  return state_->writing.has_value() || state_->committing.has_value();
}
std::optional<std::uint64_t> Checkpointer::step_being_written() const {
  return state_->writing;
}
const CheckpointOptions& Checkpointer::options() const {
  return state_->options;
}
std::uint64_t Checkpointer::staged_bytes() const {
  return state_->arena.size();
}

int Checkpointer::staging_threads() const {
  return state_->staging ? state_->staging->threads() : 0;
}

std::string Checkpointer::staging_kernel() const {
  return state_->staging ? state_->staging->kernel().name : "";
}

Checkpointer::WriteTotals Checkpointer::write_totals() const {
  return state_->totals;
}

Checkpointer::CommitCounts Checkpointer::commit_counts() const {
  return state_->commits;
}

void Checkpointer::State::record_local_commit(std::optional<std::uint64_t> step) {
  if (!step || step == last_local_everywhere) return;
  last_local_everywhere = step;
  ++commits.node_local;
}

}  // namespace tenax
