// Helpers for the launcher's fault tests: run tenax-launch over the deterministic worker as real processes, look at
// the ranks' heartbeat files, send real signals.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace tenax::test {

// A fresh directory under the build tree's temporary folder, removed by the destructor.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& child) const { return path_ + "/" + child; }

 private:
  std::string path_;
};

class Launch {
 public:
  // Starts `tenax-launch <launcher_args> -- deterministic_worker <worker_args>` with stdout and stderr to a file.
  Launch(const std::vector<std::string>& launcher_args, const std::vector<std::string>& worker_args,
         const std::string& output_path);
  ~Launch();  // kills what is left (a failed test must not leave ranks behind)
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  pid_t pid() const { return pid_; }
  // Waits for the launcher to exit and returns its exit code; -1 after `limit` (the launcher is then killed).
  int wait(std::chrono::seconds limit);
  std::string output() const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string output_path_;
};

struct RankBeat {
  long pid = 0;
  long long step = -1;
  int attempt = 0;
};
// Rank `rank`'s heartbeat of `attempt` in `run_dir`, if written.
std::optional<RankBeat> read_beat(const std::string& run_dir, int attempt, int rank);
// Polls until rank `rank` of `attempt` reports at least `step`; returns its heartbeat (nullopt after `limit`).
std::optional<RankBeat> wait_for_step(const std::string& run_dir, int rank, int attempt, long long step,
                                      std::chrono::seconds limit);

// tenax-launch arguments for fault tests: `ranks` ranks, the run directory dir/run and checkpoints in dir/ckpt, and
// short back-off, heartbeat and kill-grace intervals so that a restart takes a fraction of a second.
std::vector<std::string> quick_restart_launcher_args(const ScratchDir& dir, int ranks);

// "final parameters checksum: <hex>" from the output ("" when absent).
std::string final_checksum(const std::string& output);

// The checksum of an uninterrupted run of the worker with these ranks and worker arguments (computed once, cached).
std::string reference_checksum(int ranks, const std::vector<std::string>& worker_args);

// Lines of the run directory's ledger.jsonl whose "event" is `event`.
std::vector<std::string> ledger_lines(const std::string& run_dir, const std::string& event);
// A numeric field of a flat JSON line (NaN when absent or null).
double json_number(const std::string& line, const std::string& key);
std::string json_string(const std::string& line, const std::string& key);

std::string read_text(const std::string& path);

}  // namespace tenax::test
