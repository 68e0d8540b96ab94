// Node-local staging of a token dataset: at job start, one rank per node copies the dataset (index.json, the
// tokenizer model and every shard of both splits) from the shared file system to node-local storage, so that the
// random reads of training hit a local disk instead of the shared one.
//
//   tenax::StagingResult staged = tenax::stage_dataset(runtime.world(), "/shared/datasets/pydoc");
//   tenax::TokenDataset train(staged.dir, {.split = tenax::Split::Train, .seq_len = 1024, .seed = 1});
//
// Collective: every rank of `comm` calls stage_dataset with the same dataset_dir, before opening the dataset.
// `comm` must be a host (MPI) communicator, e.g. Runtime::world(). Ranks with the same node name (StagingOptions,
// else $SLURMD_NODENAME, else the host name) share one local copy: the lowest rank of each node copies, the others
// wait (in short rounds, so the wait never trips TENAX_COMM_TIMEOUT however long the copy takes).
//
// Where: StagingOptions::stage_dir, else $TENAX_DATA_STAGE_DIR; with neither set nothing is copied and `dir` is
// dataset_dir (outcome Off). The copy goes to <stage_dir>/tenax-data-<index crc32c as 8 hex digits>: keyed by the
// dataset's index checksum, so a changed dataset never reuses an old copy.
//
// What happens:
//   Reused   a staged copy with this key exists and is valid: its index.json is byte-identical to the shared one and
//            every file has the size and CRC32C the index records (all read back). Nothing is copied.
//   Copied   the files were copied into <key>.tmp-<node>-<pid>, each checksummed while copied and again when read
//            back from the local disk after fsync, then the directory was renamed to <key> (a reader never sees a
//            partial copy). An invalid copy found under <key> (stale, foreign, corrupt) is replaced; `reason` says why.
//   FellBack staging failed on the local side (not enough free space, a file system that refuses writes or
//            directories, a copy that does not read back correctly): `dir` is dataset_dir, `reason` says what
//            failed and a warning with the reason is logged. Training goes on from the shared copy.
// A damaged shared dataset (a file that does not match its index) is not a staging failure: every rank throws
// IoError naming the file, as opening it would.
// Stale copies of other datasets under stage_dir are left alone (they may be in use by other jobs).
//
// Errors: UsageError when some ranks have a stage directory and others do not; IoError as above; CommError from the
// collectives.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tenax/communicator.hpp"

namespace tenax {

struct StagingOptions {
  std::string stage_dir;  // empty: $TENAX_DATA_STAGE_DIR (empty as well: no staging)
  std::string node_name;  // empty: $SLURMD_NODENAME, else gethostname(); ranks with equal names share a copy
};

enum class StagingOutcome { Off, Copied, Reused, FellBack };
std::string_view staging_outcome_name(StagingOutcome outcome);  // "off", "copied", "reused", "fell back"

struct StagingResult {
  std::string dir;  // open the dataset here: the staged copy, or dataset_dir
  StagingOutcome outcome = StagingOutcome::Off;
  std::string reason;                // FellBack: why; Copied: why an existing copy was replaced (else empty)
  bool copier = false;               // this rank did its node's copy or check
  int node_ranks = 1;                // ranks sharing this node's copy
  double seconds = 0;                // wall time of stage_dataset on this rank (copy and check, or the wait)
  double node_seconds = 0;           // the node's copier's time copying and checking
  std::uint64_t bytes_copied = 0;    // by this node's copier (Copied)
  std::uint64_t bytes_verified = 0;  // read back and checksummed by this node's copier (Copied, Reused)
  std::uint64_t files = 0;           // files in the dataset (index, tokenizer, shards)
};

StagingResult stage_dataset(Communicator& comm, const std::string& dataset_dir, const StagingOptions& options = {});

}  // namespace tenax
