// The node-local tier (tier 0) of a Checkpointer: each rank's own copy of everything it holds, in node-local storage
// (CheckpointOptions::local_dir: /dev/shm or a local disk), so that a restart on the same nodes reads no tensor data
// from the shared file system.
//
//   <local_dir>/tenax-<key>/rank_<R>/step_<N>/rank_<R>.h5      the rank's blocks and blobs (the shared format's file)
//   <local_dir>/tenax-<key>/rank_<R>/step_<N>/manifest.json    a rank-scoped manifest (manifest.hpp), written last
//
// A step is written into step_<N>.tmp, fsynced and renamed: like the shared tier, a step directory without its
// manifest is never loaded. Each rank commits its own copy (no agreement when saving); at load the ranks agree on the
// newest step that every rank holds (Checkpointer::load). The key ties the copies to one run of one model: the shared
// checkpoint directory, its run id (a random token rank 0 writes there once, so a deleted and recreated directory is
// another run), the world size and every rank's shard list. Copies under another key (another job, another model, a
// resharded restart) are never read. Called on the I/O thread, except the run id and the key (constructor).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tenax/checkpoint.hpp"

namespace tenax::ckpt {

inline constexpr const char* kRunIdName = "run-id";

// The run id in <shared_dir>/run-id; "" when there is none (a run that never saved).
std::string read_run_id(const std::string& shared_dir);
// The run id, created (random, durable, written atomically) when missing. Rank 0 only.
std::string create_run_id(const std::string& shared_dir);

// 16 hex digits identifying a run's local copies (see above). `descriptions` holds every rank's describe_shards().
std::string local_tier_key(const std::string& shared_dir, const std::string& run_id, int world_size,
                           const std::vector<std::string>& descriptions);

// <local_dir>/tenax-<key>/rank_<R>.
std::string local_rank_root(const std::string& local_dir, const std::string& key, int rank);

// One shard of the copy: the shard, its staged bytes and their CRC32C.
struct LocalShard {
  const TensorShard* shard = nullptr;
  const std::uint8_t* staged = nullptr;
  std::uint32_t crc32c = 0;
};

// Writes the copy of `step` and commits it (rename, fsync), then keeps the newest `keep` steps of this root. A step
// already there (saved again after a rollback) is replaced only once the new copy is complete. Throws IoError naming
// the path on failure, leaving no partial step behind.
void write_local_copy(const std::string& root, std::uint64_t step, int rank, int world_size,
                      const ParallelLayout& layout, const std::vector<LocalShard>& shards, const Blobs& blobs, int keep,
                      bool direct_io);

// The complete steps of a rank's root (a manifest present), newest first.
std::vector<std::uint64_t> local_steps(const std::string& root);
std::string local_step_dir(const std::string& root, std::uint64_t step);
// Removes the steps newer than `step` (an abandoned future once the run went back to `step`); returns how many.
int remove_local_steps_after(const std::string& root, std::uint64_t step);
// Removes step_*.tmp left by an interrupted write; returns how many.
int remove_local_leftovers(const std::string& root);

}  // namespace tenax::ckpt
