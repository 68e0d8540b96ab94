// The node-local tier (tier 0) of a Checkpointer: each rank's own copy of everything it holds, in node-local storage
// (CheckpointOptions::local_dir: /dev/shm or a local disk), so that a restart on the same nodes reads no tensor data
// from the shared file system.
//
//   <local_dir>/tenax-<key>/rank_<R>/step_<N>/rank_<R>.h5      the rank's blocks and blobs (the shared format's file)
//   <local_dir>/tenax-<key>/rank_<R>/step_<N>/manifest.json    a rank-scoped manifest (manifest.hpp), written last
//   <local_dir>/tenax-<key>/job-id                              the job using the copies, which removes them at its
//                                                               end (local_tier_cleanup.hpp)
//
// A step is written into step_<N>.tmp, fsynced and renamed: like the shared tier, a step directory without its
// manifest is never loaded. Each rank commits its own copy (no agreement when saving); at load the ranks agree on the
// newest step that every rank holds (Checkpointer::load). The key ties the copies to one run of one model: the shared
// checkpoint directory, its run id (a random token rank 0 writes there once, so a deleted and recreated directory is
// another run), the world size and every rank's shard list. Copies under another key (another job, another model, a
// resharded restart) are never read. Called on the I/O thread, except the run id and the key (constructor).
//
// Partner copies: each rank's committed copy is also sent (Checkpointer::progress(), in the background over the
// communicator) to a rank on the next node, which keeps it under <local_dir>/tenax-<key>/partner/rank_<R>/. A restart
// that finds a rank without its own copy (its node was replaced) fetches it from the partner before loading.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/file_template.hpp"
#include "checkpoint/local_tier_cleanup.hpp"  // expand_node, the job-id file
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

// <local_dir>/tenax-<key>/rank_<R>: rank R's own copies.
std::string local_rank_root(const std::string& local_dir, const std::string& key, int rank);
// <local_dir>/tenax-<key>/partner/rank_<R>: the copies of rank R (on another node) this node keeps as its partner.
std::string partner_root(const std::string& local_dir, const std::string& key, int rank);

// The partner of every rank, from the ranks' node names and failure domains (index = rank; no domains, or all equal:
// one domain). The nodes form a ring, each node's copies kept by the next one (the last's by the first), the i-th
// rank of a node sending to the (i mod n)-th rank of the next node's n ranks. With one domain the ring is the nodes in
// the order of their lowest rank; with several, the nodes domain by domain (the largest domain first, ties and the
// nodes in a domain in the order of their lowest rank) fill the ring's even places, then its odd ones, so that no
// node's partner shares its domain unless one domain holds more than half of the nodes. -1 for every rank when all
// ranks share one node.
std::vector<int> partner_ranks(const std::vector<std::string>& node_of_rank,
                               const std::vector<std::string>& domain_of_rank = {});

// The node a rank runs on: CheckpointOptions::node_name, else this_node_name().
std::string node_name(const CheckpointOptions& options);

// The job the node-local copies belong to (the job-id file, local_tier_cleanup.hpp): TENAX_JOB_ID, else SLURM_JOB_ID;
// "" outside both (the copies are then never removed automatically). UsageError naming the variable for an id that
// is too long or not one word of printable characters.
std::string local_copies_job();

// The leaf switch in a SLURM_TOPOLOGY_ADDR ("root.s1.n3" with pattern "switch.switch.node": "s1"); "" when either is
// missing or the pattern does not end in a switch and the node.
std::string leaf_switch(const char* topology_addr, const char* topology_addr_pattern);

// A byte buffer whose resize() leaves the new bytes uninitialised: a packed step is filled by read(2) or by a transfer
// right after it is sized, and zeroing gigabytes first would be one more pass over memory for nothing.
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-initialised: no value written
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using PackedStep = std::vector<std::uint8_t, UninitializedAllocator<std::uint8_t>>;

// A committed step directory as one buffer for the communicator (its manifest and rank file, with a CRC32C over
// all of it), and back: unpack verifies the buffer and commits it as `step` under `root` like write_local_copy (tmp,
// fsync, rename, keep the newest `keep`). Both throw IoError naming what is wrong. pack_step sizes the buffer once and
// reads each file straight into it: its memory is the packed size, nothing more. Given a buffer, it packs into that
// one (its capacity reused: no page faults when it is already as large, which on a VM cost more than the reads).
PackedStep pack_step(const std::string& step_dir);
void pack_step(const std::string& step_dir, PackedStep& into);
void unpack_step(const std::string& root, std::uint64_t step, const PackedStep& packed, int keep);

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
                      bool direct_io, FileTemplate* reuse = nullptr);

// The complete steps of a rank's root (a manifest present), newest first.
std::vector<std::uint64_t> local_steps(const std::string& root);
std::string local_step_dir(const std::string& root, std::uint64_t step);
// Removes the steps newer than `step` (an abandoned future once the run went back to `step`); returns how many.
int remove_local_steps_after(const std::string& root, std::uint64_t step);
// Removes step_*.tmp left by an interrupted write; returns how many.
int remove_local_leftovers(const std::string& root);

}  // namespace tenax::ckpt
