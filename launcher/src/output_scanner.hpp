// Reads the process manager's own failure reports out of its stderr: which rank failed, on which node, how.
//   Open MPI 4 mpirun:  "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."
//                       "  Process name: [[29268,1],1]" followed by "  Exit code:    64"
//   Slurm srun:         "srun: error: n2: task 1: Killed" / "srun: error: n2: tasks 0-3: Exited with exit code 3"
//                       "srun: error: Node failure on n2"
//   tenax's SPANK plugin refusing the step (a usage error: a layout the step cannot hold, an uneven split), as srun
//   relays slurmstepd's message: "slurmstepd: error: tenax: --tenax-layout=…" ("slurmstepd-<node>: error: tenax: …"
//   where slurmd runs under a node name), or srun's own: "srun: error: tenax: …"
// These are the only place a process manager says which rank died first (the ranks are not the launcher's
// children). The first event of an attempt is the one that names the culprit; later ones are the teardown.
//
// The lines come from the ranks' output as much as from the process manager, so anything may be in them: they are read
// by hand-written scanners, linear in the line's length and without recursion, and a number that does not fit an int
// makes a line no report. Nothing here throws but std::bad_alloc.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tenax::launch {

// A report is one short line (a rank, a host name, a few words); a longer line is not one and is not looked at.
inline constexpr std::size_t kMaxScannedLine = 4096;

struct FailureEvent {
  enum class Kind { Signal, ExitCode, NodeLost, Refused } kind;
  int rank = -1;     // -1 when the report names no rank
  std::string node;  // "" when the report names no node
  int value = 0;     // the signal number or the exit code
  std::string text;  // the line, trimmed
};

class OutputScanner {
 public:
  // Feeds one line (without its newline); returns an event when the line completes one.
  // Lines longer than kMaxScannedLine are passed over.
  std::optional<FailureEvent> scan(std::string_view line);
  // Every "Node failure" report seen so far, one per node, in the order of their first report, at most kMaxLostNodes
  // (the lines may come from a program that prints anything): scan() returns each as an event too, but the caller
  // acts on the first event of an attempt, and the node-failure report of a lost node often comes after the failures
  // it caused.
  static constexpr std::size_t kMaxLostNodes = 64;
  const std::vector<FailureEvent>& lost_nodes() const { return lost_nodes_; }

 private:
  int pending_mpirun_rank_ = -1;  // "Process name" seen, "Exit code" expected next
  std::vector<FailureEvent> lost_nodes_;
};

// "SIGTERM", or "signal N" when the number has no name.
std::string signal_name(int signo);

// "Killed" -> 9, "Segmentation fault" -> 11, ... ; 0 when unknown.
int signal_from_description(std::string_view description);

}  // namespace tenax::launch
