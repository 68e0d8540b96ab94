#include "worker/heartbeat_file.hpp"

#include <string>

#include "core/file_system.hpp"
#include "core/json.hpp"
#include "tenax/error.hpp"

namespace tenax::worker {

std::string format_heartbeat(const HeartbeatRecord& r) {
  // Core's JSON writer: the node name (SLURMD_NODENAME, any length and any bytes) is escaped and never cut.
  json::ObjectWriter out;
  out.add("v", 1)
      .add("rank", r.rank)
      .add("node", r.node)
      .add("pid", r.pid)
      .add("attempt", r.attempt)
      .add("beat", r.beat)
      .add("step", r.step)
      .add("seq", r.seq)
      .add("resumed_step", r.resumed_step)
      .add("resumed_tier", r.resumed_tier)
      .add("load_s", r.load_s)
      .add("productive_s", r.productive_s)
      .add("steps_done", r.steps_done)
      .add("checkpoint_step", r.checkpoint_step)
      .add("checkpoint_stall_s", r.checkpoint_stall_s)
      .add("final_checkpoint_s", r.final_checkpoint_s)
      .add("shared_saves", r.shared_saves)
      .add("local_saves", r.local_saves)
      .add("preempt_signal", r.preempt_signal)
      .add("exit", r.exit_code);
  return out.str() + "\n";
}

std::string heartbeat_dir(const std::string& run_dir, int attempt) {
  return run_dir + "/heartbeat/attempt-" + std::to_string(attempt);
}

std::string heartbeat_path(const std::string& run_dir, int attempt, int rank) {
  return heartbeat_dir(run_dir, attempt) + "/rank-" + std::to_string(rank) + ".json";
}

void write_heartbeat_file(const std::string& path, const std::string& content) {
  try {
    fs::replace_file_atomically(path, content, fs::Durability::None);
  } catch (const IoError& e) {
    throw IoError(std::string(e.what()) + " (the run directory must be writable by every rank)");
  }
}

}  // namespace tenax::worker
