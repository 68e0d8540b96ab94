// The launcher's view of the ranks' heartbeat files (<run-dir>/heartbeat/attempt-<a>/rank-<r>.json, written by
// tenax::worker::Worker; format in docs/worker-protocol.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tenax::launch {

struct Heartbeat {
  int rank = -1;
  std::string node;
  long pid = 0;
  int attempt = 0;
  std::uint64_t beat = 0;
  std::int64_t step = -1;
  std::uint64_t seq = 0;
  std::int64_t resumed_step = -1;
  std::string resumed_tier;  // "node-local" or "shared" once resumed from a checkpoint; "" otherwise or unknown
  double load_s = 0;
  double productive_s = 0;
  std::int64_t steps_done = 0;
  std::int64_t checkpoint_step = -1;
  double checkpoint_stall_s = 0;
  double final_checkpoint_s = 0;                   // of checkpoint_stall_s: the checkpoint that ended the attempt
  std::int64_t shared_saves = 0, local_saves = 0;  // checkpoints committed per tier in this attempt
  int preempt_signal = 0;
  int exit_code = -1;
};

// A heartbeat is one line of a few hundred bytes; a file larger than this is not one and is not read.
inline constexpr std::size_t kMaxHeartbeatBytes = 65536;

// Every record in <run_dir>/heartbeat/attempt-<attempt> (a record naming another attempt is skipped). A file that
// cannot be parsed throws IoError naming it.
std::vector<Heartbeat> read_heartbeats(const std::string& run_dir, int attempt);

Heartbeat parse_heartbeat(const std::string& text, const std::string& origin);

// Before attempt `attempt` starts: removes the heartbeat folders of earlier attempts (moved aside first, as ranks of a
// cut-off node may still write there) and creates this one's. Throws IoError when this attempt's folder cannot be
// made; returns a warning for each stale folder it could not remove (harmless: only attempt-<attempt> is read).
std::vector<std::string> prepare_heartbeats(const std::string& run_dir, int attempt);

// The highest attempt whose heartbeat folder (<run_dir>/heartbeat/attempt-N) is there, 0 when none: the attempt of a
// launcher killed outright (SIGKILL) left its folder but no ledger record, and numbering must go on after it (its
// per-attempt files would be overwritten otherwise). Never throws.
int highest_heartbeat_attempt(const std::string& run_dir);

}  // namespace tenax::launch
