// Internal: what a Checkpointer holds between calls (shared by checkpointer.cpp and load.cpp).
//
// In-flight state is identical on every rank at every moment the training thread is inside a public call, because it
// only changes at collective points: `writing` is set by save() on every rank and cleared by the agreement that every
// rank's file is durable; `committing` is set by that agreement and cleared by the next one (which also covers rank 0's
// commit job, queued on its I/O thread before any later write).
#pragma once

#include <future>
#include <memory>
#include <optional>
#include <vector>

#include "checkpoint/file_template.hpp"
#include "checkpoint/io_thread.hpp"
#include "checkpoint/local_tier.hpp"
#include "checkpoint/manifest.hpp"
#include "checkpoint/shard_plan.hpp"
#include "checkpoint/staging.hpp"
#include "checkpoint/staging_pass.hpp"
#include "comm/agreement.hpp"
#include "core/directory_lock.hpp"
#include "core/unique_fd.hpp"
#include "tenax/checkpoint.hpp"
#include "tenax/error.hpp"

namespace tenax {

struct Checkpointer::State {
  // One block this rank writes: shards[shard] is the source, plan.blocks[block] the block, staged at arena + offset.
  struct LocalWrite {
    int shard = 0;
    int block = 0;
    std::size_t offset = 0;
    std::size_t bytes = 0;
    int local = -1;  // the local shard whose staged copy this block is (node-local tier on), else -1
  };
  // What a write job reports back: the outcome and, on success, what the manifest needs from this rank.
  struct WriteResult {
    Outcome outcome;
    std::uint64_t file_bytes = 0;
    std::uint64_t direct_bytes = 0;
    std::vector<std::uint32_t> crcs;  // per LocalWrite
    std::vector<ckpt::ManifestBlob> blobs;
  };

  State(Communicator& w, CheckpointOptions o) : world(w), rank(w.rank()), world_size(w.size()), options(std::move(o)) {}

  Communicator& world;  // used on the training thread only
  const int rank;       // copies for the I/O thread, which never touches the communicator
  const int world_size;
  CheckpointOptions options;
  // The node-local tier folder's in-use lock (local_tier_cleanup.hpp): a job's end leaves the folder while this rank
  // lives. Declared before the I/O threads, so released only after they are gone.
  UniqueFd local_in_use;
  // Rank 0's lock of the checkpoint directory (core/directory_lock.hpp): no other run saves there, or removes this
  // run's unfinished saves, while this checkpointer lives. Released after the I/O threads, like local_in_use.
  DirectoryLock dir_lock;
  std::vector<TensorShard> shards;
  ckpt::Plan plan;
  std::vector<LocalWrite> writes;  // in plan block order
  bool any_device = false;         // this rank writes a Device shard (pinned staging, a fence)
  int cuda_device = -1;            // the device of this rank's Device shards, for the I/O thread; -1: none
  ckpt::StagingArena arena;
  std::unique_ptr<ckpt::StagingPass> staging;    // not in a read-only checkpointer
  std::unique_ptr<ckpt::DeviceCopyFence> fence;  // the shared write's device copies
  std::vector<std::uint32_t> staged_crcs;        // host shards' CRCs, computed while staging
  Blobs staged_blobs;

  std::optional<std::uint64_t> writing;
  std::future<WriteResult> write_done;
  std::optional<std::uint64_t> committing;
  std::future<Outcome> commit_done;  // rank 0 only
  std::optional<std::uint64_t> last_committed;
  CommitCounts commits;  // agreed over the ranks, like last_committed and last_local_everywhere
  WriteTotals totals;    // this rank's files written so far (training thread, from each finished write)

  // The node-local tier (local_tier.hpp); an empty root: off. Its shards are staged at local_offsets, and each block
  // of `writes` that is one of them shares that copy.
  std::string local_root;
  std::vector<TensorShard> local_shards;
  std::vector<std::size_t> local_offsets;
  std::vector<std::uint32_t> local_crcs;
  // Where save_local() stages while a shared write still reads `arena` (allocated at the first such save, then kept):
  // the node-local copy goes ahead without waiting for a slow shared directory. Its layout is the local shards' part
  // of `arena` (local_offsets), local_staging_bytes long.
  ckpt::StagingArena local_arena;
  enum class LocalArena { Untried, Ready, Refused };
  LocalArena local_arena_state = LocalArena::Untried;
  std::size_t local_staging_bytes = 0;
  Blobs local_blobs;  // the node-local write's blobs (staged_blobs stay the shared write's)
  std::unique_ptr<ckpt::DeviceCopyFence> local_fence;  // the node-local copy's device copies
  std::optional<std::uint64_t> local_writing;
  struct LocalResult {
    std::string failure;      // "" when the copy is committed
    ckpt::PackedStep packed;  // the committed copy for the partner (pack_step), when there is one
  };
  std::future<LocalResult> local_done;
  std::optional<std::uint64_t> last_local;         // this rank's newest committed copy
  std::optional<std::uint64_t> local_unconfirmed;  // a local save not yet known to be committed on every rank
  std::optional<std::uint64_t> last_local_everywhere;
  std::string local_base;  // options.local_dir with %n expanded
  std::string local_key;

  // Partner copies (local_tier.hpp): every rank's partner, whom this rank sends its copies to (-1: none, all ranks
  // on one node) and whose copies it keeps.
  std::vector<int> partner_of;
  int partner_to = -1;
  std::vector<int> partner_from;
  // The exchange of one step's copies. Set by save()/save_local() on every rank alike, started (a collective point in
  // progress(), wait() or the next save) once every rank's local write is known to be done, finished once every
  // transfer is.
  struct PartnerExchange {
    std::uint64_t step = 0;
    bool started = false;
    ckpt::PackedStep out;              // this rank's packed copy; empty when its local write failed
    std::vector<ckpt::PackedStep> in;  // per partner_from
    std::uint64_t out_size = 0;
    std::vector<std::uint64_t> in_sizes;
    Work work;
  };
  std::optional<PartnerExchange> partner;
  // The last exchange's send buffer, handed back by store_partner() and packed into again by the next local_job(): the
  // next copy reuses its memory instead of faulting in as much anew. Only touched between exchanges (one at a time).
  ckpt::PackedStep spare_pack;
  // progress()'s question, posted at one call and answered at the next (DeferredAgreement), and what it asked about.
  struct Asked {
    bool local = false;
    bool partner = false;
    bool writing = false;
    bool committing = false;
  };
  DeferredAgreement poll{world};
  Asked asked;
  // The structure of this rank's files, learned from the first of each tier and reused while it fits (I/O thread).
  ckpt::FileTemplate shared_file_template;
  ckpt::FileTemplate local_file_template;
  ckpt::FileTemplate vds_template;  // rank 0's commits

  // Declared last so that they are destroyed first: their queued jobs use everything above. `io` writes and commits
  // the shared directory (and loads); `local_io`, with the node-local tier, writes its copies and keeps partners'.
  std::unique_ptr<ckpt::IoThread> local_io;
  std::unique_ptr<ckpt::IoThread> io;

  void finish_write();   // collective: the agreement that every rank's file is durable, then queue the commit
  void finish_commit();  // collective: the agreement that rank 0's commit succeeded
  // Records a checkpoint every rank committed to the shared directory / holds a node-local copy of, counting it.
  void record_shared_commit(std::uint64_t step);
  void record_local_commit(std::optional<std::uint64_t> step);
  WriteResult write_job(std::uint64_t step);
  // On local_io: this rank's node-local copy of the shards staged at `staged` (packed for the partner).
  LocalResult local_job(std::uint64_t step, const std::uint8_t* staged);
  // Copies the node-local shards (when the tier is on) to `local_dst` (laid out as local_offsets) and, with `shared`,
  // the blocks this rank writes to the shared directory into `arena`, with their CRCs. Training thread.
  void stage(bool shared, std::uint8_t* local_dst);
  // Collective: whether local_arena is there, allocating it (agreed) the first time it is asked for.
  bool local_arena_ready();
  // Queues the node-local write of `step`, staged at `staged` with `blobs` (save() and save_local()).
  void submit_local(std::uint64_t step, const std::uint8_t* staged, const Blobs& blobs);
  // Takes the node-local write's result when it is done (or, with `block`, once it is): a failure is a warning.
  void finish_local(bool block);
  // Collective, blocking: waits for every rank's write of the newest local save and agrees whether every rank
  // committed it.
  void confirm_local();
  // Collective, blocking: the node-local tier's part of wait() and of the next save: drain_poll, finish_local,
  // confirm_local, finish_partner.
  void settle_local();
  // Collective: posts this rank's copy to its partner and the copies it keeps (once every rank's local write of the
  // step is done); store_partner hands what arrived to the I/O thread; finish_partner does both, waiting.
  void start_partner();
  void store_partner();
  void finish_partner();
  // Collective, progress(): reads the answer to the question posted at the previous call (local write done and
  // committed everywhere, partner transfers done, shared write durable, commit done), acts on it, and posts the next
  // question while anything is in flight. No rank waits here for another to reach the same call.
  void poll_progress();
  // Collective: reads the answer to a posted question and acts on it (as poll_progress() does), before a blocking
  // path asks again. It may finish the shared write or commit, raising their errors.
  void drain_poll();
  // Collective (load): every rank lacking its own copy of `step` receives it from the rank that keeps it as partner
  // (`holder`, -1: it has its own) and commits it as its own. The outcome, agreed.
  Outcome fetch_from_partners(std::uint64_t step, const std::vector<int>& holder);
  // A read-only checkpointer about to write a partner's copy into the tier folder: marks the folder as a writer's
  // constructor does (in use, and naming this job where it names none yet), so that the job's end removes what it
  // writes. Another job's folder is neither held nor renamed. Throws what making the folder or reading the job id
  // throws (the fetch's outcome then says so, on every rank).
  void adopt_local_folder();
  // Takes the tier folder's in-use lock into local_in_use (making the folder), or warns that it could not.
  void hold_local_folder(const std::string& folder);
  // The node-local tier's part of load(): the loaded result, or nothing (then the shared directory is read).
  std::optional<LoadResult> load_local(const std::optional<std::uint64_t>& newest_shared,
                                       std::vector<std::string>& rejected);
  ckpt::Manifest build_manifest(std::uint64_t step, const std::vector<std::string>& reports) const;
};

}  // namespace tenax
