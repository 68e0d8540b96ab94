// Internal: one rank's heartbeat record and its file in the run directory (format: docs/worker-protocol.md).
#pragma once

#include <cstdint>
#include <string>

namespace tenax::worker {

struct HeartbeatRecord {
  int rank = 0;
  std::string node;
  long pid = 0;
  int attempt = 1;
  std::uint64_t beat = 0;             // incremented on every write: the launcher's liveness signal
  std::int64_t step = -1;             // last completed step; -1 until resumed_from()
  std::uint64_t seq = 0;              // tenax::operations_issued() when written
  std::int64_t resumed_step = -1;     // the step this attempt resumed from; -1 until known
  std::string resumed_tier;           // "node-local" or "shared" once resumed from a checkpoint, else ""
  double load_s = 0;                  // checkpoint load time of this attempt
  double productive_s = 0;            // step time of this attempt, checkpoint stalls excluded
  std::int64_t steps_done = 0;        // steps completed in this attempt
  std::int64_t checkpoint_step = -1;  // newest checkpoint committed in this attempt; -1: none yet
  double checkpoint_stall_s = 0;      // total time training was blocked by checkpoints in this attempt
  double final_checkpoint_s = 0;      // of which by the checkpoint that ended it (end of training, preemption)
  std::int64_t shared_saves = 0;      // checkpoints committed to the shared directory in this attempt
  std::int64_t local_saves = 0;       // checkpoints committed to the node-local tier (every rank) in this attempt
  int preempt_signal = 0;             // the signal that requested preemption, 0 when none
  int exit_code = -1;                 // set by Worker::finish(); -1 while running
};

// One line of JSON, newline-terminated.
std::string format_heartbeat(const HeartbeatRecord& record);

// <run_dir>/heartbeat/attempt-<attempt>/rank-<rank>.json. One folder per attempt: a straggler of an earlier attempt
// (a task on a node Slurm has not finished killing) can never overwrite a record of the current one.
std::string heartbeat_dir(const std::string& run_dir, int attempt);
std::string heartbeat_path(const std::string& run_dir, int attempt, int rank);

// Replaces `path` atomically (write a temporary beside it, then rename), so a reader sees the old or the new record,
// never a torn one. No fsync: a heartbeat is worth nothing after a crash of the node, and fsync per beat would cost
// far more than the beat on a parallel file system. Throws IoError naming the path.
void write_heartbeat_file(const std::string& path, const std::string& content);

}  // namespace tenax::worker
