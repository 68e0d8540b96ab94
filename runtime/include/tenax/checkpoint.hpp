// Asynchronous, atomic, verified and reshardable checkpoints in plain HDF5 (format: docs/checkpoint-format.md).
//
// The model is described to the checkpointer as a list of TensorShards: one rank's rectangular block of a named global
// tensor (row-major, contiguous in memory). A tensor held whole is a block at offset 0; a tensor-parallel weight is a
// block of rows or columns; a ZeRO-1 optimizer shard is a 1-D tensor's [begin, begin+count) range. Nothing here knows
// about layers or optimizers: a different layout at load time is just a different list of blocks.
//
//   tenax::Checkpointer ckpt(world, tenax::CheckpointOptions::from_env(layout), shards);   // collective
//   tenax::LoadResult r = ckpt.load();                       // collective; fills the shards if a checkpoint exists
//   for (step = r.loaded ? r.step + 1 : 0; ...; ++step) {
//     train_step();
//     if (step % 100 == 0) ckpt.save(step, blobs);           // collective; blocks only while copying to staging
//     ckpt.progress();                                       // collective; cheap; commits finished checkpoints
//   }
//   ckpt.wait();                                             // collective; the last checkpoint is durable on return
//
// Collectives: every public member except the accessors is a collective over `world`: every rank calls it, in the same
// order, from the thread that owns the communicator (the training thread). The checkpointer never calls the
// communicator from its own thread.
//
// Threads: each rank has a background I/O thread for the shared directory (writes, fsyncs, the manifest, the
// virtual-dataset file, reads at load) and, with the node-local tier, one for that tier (its copies and the partner
// copies it keeps); they make every HDF5 call of this checkpointer. The training thread only copies into staging
// memory and takes part in the agreements.
//
// Replicated blocks: a block held by several ranks (same tensor, offset and shape, e.g. a TP shard on every DP rank or
// a tensor every rank holds whole) is written once, by one of the ranks that hold it, chosen to spread the bytes over
// the holders (largest blocks first, each to the holder with the fewest bytes so far). The constructor exchanges
// every rank's shard list to decide this and refuses (UsageError, naming the tensor) shard lists whose distinct blocks
// overlap, leave part of a tensor uncovered or disagree about dtype or global shape.
//
// Errors: a failed write (ENOSPC, EIO, EACCES, ...) on any rank is raised on every rank at the next save(), progress()
// or wait() as an IoError naming the failing rank, the file and the system's error text; the partial checkpoint is
// removed and committed checkpoints are untouched. A failed commit of one step never removes the next step's write.
// The checkpointer stays usable afterwards: the next save() tries again.
//
// Waiting: where ranks wait for one another's I/O (a slow writer, rank 0's commit, a large load), they do it in
// rounds of one small all-reduce at most 100 ms apart, so no collective call lasts long enough for the communication
// watchdog (TENAX_COMM_TIMEOUT) to end ranks that are only waiting.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tenax/communicator.hpp"
#include "tenax/dtype.hpp"
#include "tenax/error.hpp"
#include "tenax/parallel_layout.hpp"

namespace tenax {

enum class MemoryKind : std::uint8_t { Host, Device };

// One rank's block of a global tensor. `data` points to the block's elements, row-major and contiguous
// (shape[0] * ... * shape[n-1] elements). Names may contain '/' (it becomes an HDF5 group in the files) and letters,
// digits and "_.-:"; no name may be a '/'-prefix of another.
struct TensorShard {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::uint64_t> global_shape;  // the whole tensor; a scalar is shape {1}
  std::vector<std::uint64_t> offset;        // where this block starts in the global tensor; empty: all zeros
  std::vector<std::uint64_t> shape;         // this block's extent; empty: the whole tensor
  void* data = nullptr;                     // saving only reads it; loading writes it
  MemoryKind memory = MemoryKind::Host;     // Device: CUDA device memory (builds with TENAX_HAVE_CUDA only)

  // The whole tensor on this rank.
  static TensorShard whole(std::string name, DType dtype, std::vector<std::uint64_t> shape, void* data);
  // An N-d block of a larger tensor.
  static TensorShard block(std::string name, DType dtype, std::vector<std::uint64_t> global_shape,
                           std::vector<std::uint64_t> offset, std::vector<std::uint64_t> shape, void* data);
  // Elements [begin, begin+count) of a flat 1-D tensor of `total` elements (ZeRO-1 optimizer shards).
  static TensorShard flat_range(std::string name, DType dtype, std::uint64_t total, std::uint64_t begin,
                                std::uint64_t count, void* data);

  std::uint64_t elements() const;
  std::uint64_t bytes() const { return elements() * dtype_size(dtype); }
};

// Small per-rank state saved with every checkpoint: step counters, RNG state, data-loader position, loss-scaler state.
// Each rank saves its own; at load a rank receives the blobs of one saved rank (see LoadOptions::blob_rank).
using Blobs = std::map<std::string, std::vector<std::uint8_t>>;

template <class T>
void put_value(Blobs& blobs, const std::string& name, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>, "put_value stores the object's bytes");
  std::vector<std::uint8_t> bytes(sizeof(T));
  std::memcpy(bytes.data(), &value, sizeof(T));
  blobs[name] = std::move(bytes);
}

// Throws UsageError if the blob is missing or its size is not sizeof(T).
template <class T>
T get_value(const Blobs& blobs, const std::string& name) {
  static_assert(std::is_trivially_copyable_v<T>, "get_value reads the object's bytes");
  auto it = blobs.find(name);
  if (it == blobs.end()) throw UsageError("checkpoint blob '" + name + "' is not in the loaded checkpoint");
  if (it->second.size() != sizeof(T))
    throw UsageError("checkpoint blob '" + name + "' holds " + std::to_string(it->second.size()) +
                     " bytes, the requested type has " + std::to_string(sizeof(T)));
  T value;
  std::memcpy(&value, it->second.data(), sizeof(T));
  return value;
}

struct CheckpointOptions {
  std::string dir;        // where step_<N>/ directories and `latest` live (TENAX_CHECKPOINT_DIR); created if missing
  int keep = 3;           // complete checkpoints kept (TENAX_CKPT_KEEP, >= 1); the newest is never deleted
  int io_nice = 0;        // niceness the background I/O threads add to their own (TENAX_CKPT_IO_NICE, 0..19)
  bool direct_io = true;  // write large blocks with O_DIRECT where the file system allows (TENAX_CKPT_DIRECT_IO)
  // Threads of the blocking copy into staging memory (TENAX_CKPT_STAGING_THREADS; 0..256): the training thread and
  // staging_threads - 1 helpers, which copy while the training thread waits anyway. 0: the CPUs this rank may use,
  // divided among the ranks of its host whose CPU affinity overlaps its own (all of them when unbound), at most 8.
  int staging_threads = 0;
  // The fused copy + CRC32C kernel of that copy (TENAX_CKPT_STAGING_KERNEL, whose values are auto and the names):
  // "" or "auto" takes the first this CPU has in tenax's order of preference; else the exact name of one it has
  // (crc32-3x-nt64 with AVX-512, vpclmulqdq-fold-nt32 with VPCLMULQDQ, crc32-3x-nt32 with AVX2, crc32-3x-nt8 with
  // SSE4.2, tables on every CPU and the only one off x86; tenax-bench-checkpoint lists the CPU's). Each rank checks the
  // name against its own CPU, and a writing checkpointer's constructor raises UsageError on every rank when one rank's
  // CPU lacks it (a read_only one ignores it). The files are the same whichever kernel ran (ranks on different CPUs may
  // run different ones under auto): for reproducing a measurement, or avoiding a kernel that is slow on some machine.
  std::string staging_kernel;
  ParallelLayout layout;        // recorded in the manifest (informational: loading never needs the saved layout)
  void* cuda_stream = nullptr;  // cudaStream_t that produces the Device shards; copies are ordered on it
  // Load only (e.g. evaluating a checkpoint on read-only storage): no start-up probe of the directory, no clean-up of
  // leftovers, no staging memory; save() raises UsageError. In local_dir it writes only what load() writes on any
  // checkpointer: a copy fetched from the partner (with the folder that holds it, keeping local_keep steps), and,
  // loading the newest checkpoint, the removal of this rank's steps newer than the one loaded (all of them when none
  // loads). The job's node-local copies are marked in use while it lives, as a writer's are (the job's end on the node
  // leaves them); another job's are not.
  bool read_only = false;
  // The node-local tier (TENAX_CKPT_LOCAL_DIR; "": none): a directory on each node's own storage (/dev/shm, a local
  // SSD) where every save, and every save_local(), also puts each rank's own copy of everything it holds, under
  // <local_dir>/tenax-<key>/rank_<R>/ ("%n" in it stands for the node's name). When the ranks span several nodes,
  // each copy is also sent in the background to a rank of another node (its partner; under another leaf switch when
  // the ranks span several, see failure_domain), which keeps it under
  // <local_dir>/tenax-<key>/partner/. load() prefers this tier when every rank's copy of a step at least as new as the
  // shared directory's newest is there or at its partner. `local_keep` (TENAX_CKPT_LOCAL_KEEP, >= 1) steps are kept
  // per rank and per partner.
  std::string local_dir;
  int local_keep = 2;
  // This rank's node ("": SLURMD_NODENAME, else the host name): which ranks share a node, and so whose partner is whom.
  std::string node_name;
  // The part of the cluster this node fails with, e.g. its leaf switch ("": the leaf switch in SLURM_TOPOLOGY_ADDR,
  // which Slurm's topology/tree plugin sets; none without it). Partners are chosen across failure domains wherever
  // the ranks span several, so that a lost switch does not take a node's copies and their partner copies together.
  std::string failure_domain;

  // dir, keep, io_nice, direct_io, staging_threads, staging_kernel, local_dir and local_keep from TENAX_CHECKPOINT_DIR
  // / TENAX_CKPT_KEEP / TENAX_CKPT_IO_NICE / TENAX_CKPT_DIRECT_IO / TENAX_CKPT_STAGING_THREADS /
  // TENAX_CKPT_STAGING_KERNEL / TENAX_CKPT_LOCAL_DIR / TENAX_CKPT_LOCAL_KEEP. Throws UsageError if TENAX_CHECKPOINT_DIR
  // is unset.
  static CheckpointOptions from_env(const ParallelLayout& layout = {});
  // The same without the directory (left empty, TENAX_CHECKPOINT_DIR not read or required): for a caller that takes
  // the directory, and perhaps keep or local_dir, from its own configuration and the rest from the environment, as
  // tenax's engine does. Every TENAX_CKPT_* variable of these options is read here, so no caller can miss one.
  static CheckpointOptions tuning_from_env();
};

struct LoadOptions {
  // Which saved rank's blobs this rank receives: -1 = the same rank number if the saved world had it, else rank 0.
  int blob_rank = -1;
  // Load this step instead of the newest valid one (no fallback: an invalid one is an IoError).
  std::optional<std::uint64_t> step;
};

struct LoadResult {
  bool loaded = false;  // false: the directory holds no complete checkpoint (a fresh start); shards untouched
  std::uint64_t step = 0;
  std::string path;  // the step_<N> directory loaded
  ParallelLayout saved_layout;
  int saved_world_size = 0;
  int blob_rank = -1;  // the saved rank whose blobs are in `blobs`
  Blobs blobs;
  // Newer complete checkpoints that were rejected (missing, truncated or corrupt shard), each with the reason.
  std::vector<std::string> rejected;
  // Loaded from the node-local tier (every rank read only its own copy under CheckpointOptions::local_dir; `path` is
  // this rank's step directory there).
  bool node_local = false;
};

// A complete checkpoint found in a directory (one whose manifest exists), newest first.
struct CheckpointInfo {
  std::uint64_t step = 0;
  std::string path;
};
std::vector<CheckpointInfo> list_checkpoints(const std::string& dir);

class Checkpointer {
 public:
  // Collective. Validates the options and every rank's shards (UsageError naming the problem), decides which rank
  // writes each block, creates `dir` and checks that every rank can write to it and sees the same directory (a
  // UsageError naming the directory, rank and host otherwise: a read-only or foreign directory, or a node-local one),
  // takes the directory for this run (rank 0 holds `dir`/tenax-launch.lock's flock until the Checkpointer goes, unless
  // the program's own tenax-launch holds it; a directory another run or another Checkpointer saves into is a
  // UsageError naming that run; may wait up to 30 s for the earlier run of a requeued Slurm job), then removes
  // step_*.tmp left by an interrupted run, and allocates and pre-touches the staging memory (as many bytes as
  // this rank writes; reused by every save). With options.read_only only the shards are checked.
  //
  // With options.local_dir, `local_shards` are what this rank's node-local copy holds and what a load from that tier
  // restores: every block the rank holds, replicas included, so that a restart on the same nodes needs no other rank's
  // copy (empty: `shards`). The constructor then also derives the tier's key (local_tier.hpp; rank 0 creates the run
  // id file `run-id` in `dir`) and removes this rank's interrupted local writes. A Checkpointer that loads (for
  // example a read_only one) finds the copies only if its `shards` equal the saving one's `local_shards`.
  Checkpointer(Communicator& world, CheckpointOptions options, std::vector<TensorShard> shards,
               std::vector<TensorShard> local_shards = {});
  // Waits for this rank's I/O thread, but cannot commit (that needs every rank): call wait() first. A checkpoint left
  // uncommitted is never loaded and is removed by the next Checkpointer on the same directory.
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Collective. Starts checkpoint `step`: first finishes the previous one (blocks if it is still being written: at
  // most one is in flight); then copies every shard this rank writes into staging memory, computing its CRC32C in the
  // same pass, hands the write to the I/O thread and returns. If the previous one failed, its IoError is raised once
  // this one is under way (step_being_written() == step), so that a failed write does not cost the next checkpoint
  // too; an error of this one's own copy is raised with nothing under way. The shards may be
  // modified as soon as save() returns (Device shards: by work enqueued on options.cuda_stream after this call).
  void save(std::uint64_t step, const Blobs& blobs = {});

  // Collective, non-blocking; meant to be called once per training step. Commits the checkpoint in flight once every
  // rank's shards are durable, and raises an error from the writing or the commit. Returns true when nothing is in
  // flight any more (in_flight()). While anything is in flight (a shared checkpoint, a node-local copy not yet known
  // to be committed on every rank, a partner transfer) each call posts one small nonblocking all-reduce of what this
  // rank has finished and reads the answer to the previous call's, so that polling never holds a rank until the
  // others reach the same step; every rank acts on the same answer at the same call, and acting on it is collective
  // as before (a commit's agreement, starting a partner transfer). Each step of the commit protocol therefore lands
  // one call later than the data allows. Nothing is posted when nothing is in flight.
  bool progress();

  // Collective. Saves `step` to the node-local tier only: copies the local shards into staging memory and returns;
  // the tier's own I/O thread writes and commits this rank's copy. It waits for the previous node-local copy (and its
  // partner transfer), not for a shared checkpoint still being written: while one is, the copy goes to staging memory
  // of its own (the local shards' size again, allocated at the first such call and kept; where that memory cannot be
  // had, it waits for the write after all, with a warning). It raises a failure of that shared write when it learns of
  // it, as progress() does, once its own copy is under way. A failed local write is a warning (the shared tier is what
  // stays authoritative), never an error. UsageError without options.local_dir.
  void save_local(std::uint64_t step, const Blobs& blobs = {});

  // Collective. Blocks until the checkpoint in flight is committed (durable, renamed, `latest` updated), or raises
  // its error. Returns at once when nothing is in flight.
  void wait();

  // Collective. Blocks until nothing is in flight, then returns if checkpoint `step` is committed and raises
  // otherwise: the failure of an earlier checkpoint met on the way is logged, not raised (a failed commit of the
  // previous step is learnt of when `step` is written, and says nothing about `step`). For a program's last or only
  // checkpoint, where wait() would let an earlier failure hide whether this one committed.
  void settle(std::uint64_t step);

  // Collective, synchronous: the preemption path. Settles what is in flight (an earlier failure is logged, not
  // raised: it does not stop this one), then saves `step` and settle(step)s it. On return the checkpoint is durable
  // and `latest` points to it.
  void emergency_save(std::uint64_t step, const Blobs& blobs = {});

  // Collective. With options.local_dir (and no LoadOptions::step, and each rank's own blobs): first the node-local
  // tier. The ranks agree on the newest step that every rank holds a complete local copy of and that is not older than
  // the shared directory's newest complete checkpoint; every rank reads only its own copy, verified as below; if any
  // rank's copy fails, every rank tries the next such step, then the shared directory. Local steps newer than the step
  // loaded (from either tier) are removed: they belong to a future the run went back from.
  //
  // Collective. Loads the newest complete checkpoint into the shards given to the constructor, reading from each saved
  // file only the blocks this rank's shards overlap (any saved layout and world size). The manifest's own checksum
  // and consistency are verified, every block read is checked against its CRC32C and its dataset's own attributes
  // (tensor, dtype, global shape, offset, shape); a damaged manifest or a missing, truncated or corrupt file makes
  // every rank fall back to the previous complete checkpoint (a warning names the file). Throws IoError when
  // checkpoints exist but none is valid, and UsageError naming the tensor when the checkpoint belongs to another model
  // (unknown tensor, different shape or dtype, with the rank files agreeing with the manifest).
  LoadResult load(const LoadOptions& options = {});

  // The step of the newest checkpoint this checkpointer committed, if any.
  std::optional<std::uint64_t> last_committed_step() const;
  // The newest step whose node-local copies this checkpointer committed on every rank (known at wait(), at the next
  // save, or at the second progress() after every rank's copy was written), if any: a restart on the same nodes can
  // resume there.
  std::optional<std::uint64_t> last_local_step() const;
  // True while a checkpoint is being written or awaits its commit.
  bool in_flight() const;
  // The step of the shared checkpoint being written (from save() until the call that learns it is durable), if any:
  // after save(step) raised an earlier checkpoint's failure, step_being_written() == step says that this one is
  // under way all the same.
  std::optional<std::uint64_t> step_being_written() const;
  const CheckpointOptions& options() const;
  // Bytes this rank writes per checkpoint (the size of its staging memory; node-local copies staged while a shared
  // write is in flight use as much again as the node-local part of it).
  std::uint64_t staged_bytes() const;
  // Threads that copy into staging memory during save() (CheckpointOptions::staging_threads, resolved); 0 when
  // read_only.
  int staging_threads() const;
  // The kernel of that copy (CheckpointOptions::staging_kernel, resolved); "" when read_only.
  std::string staging_kernel() const;
  // This rank's checkpoint files written so far, counted when each write finished (by wait(), progress() or the next
  // save): how many bytes went to storage and how many of them around the page cache (O_DIRECT; 0 where the file
  // system refused it or direct_io is off). The store path a figure was measured on, for benchmarks and logs.
  struct WriteTotals {
    std::uint64_t files = 0;
    std::uint64_t bytes = 0;
    std::uint64_t direct_bytes = 0;
  };
  WriteTotals write_totals() const;
  // Checkpoints this checkpointer committed so far, per tier: to the shared directory, and steps every rank holds a
  // node-local copy of. The same on every rank (each is counted once the ranks agree on it).
  struct CommitCounts {
    std::uint64_t shared = 0;
    std::uint64_t node_local = 0;
  };
  CommitCounts commit_counts() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tenax
