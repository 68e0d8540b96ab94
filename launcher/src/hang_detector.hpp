// Hang detection from heartbeats. Pure logic: time comes in as seconds on the launcher's monotonic clock, so the
// ranks' clocks (other nodes) never matter: a heartbeat counts from the moment the launcher first sees it change.
//
// Three verdicts:
//   silent        a rank's heartbeat stopped changing for longer than the timeout. Its heartbeat thread writes on a
//                 timer, so silence means the process is stopped, its node is gone, or it cannot write: that rank
//                 (and its node) is the culprit.
//   stalled       every rank still beats, but no step completed and no collective was issued for the timeout. When
//                 the ranks' collective sequence numbers differ, the ranks with the lowest one are the laggards
//                 (the others wait for them inside the next collective); otherwise they are all stuck together.
//   not started   a rank wrote no heartbeat within the startup timeout.
// Before an attempt completes its first step the startup timeout applies to stalls (loading can take long); after,
// the hang timeout: fixed (--hang-timeout) or derived = max(--hang-timeout-min, factor x the slowest step seen).
// Disabled (--hang-timeout 0), only the startup timeout is left: a rank that never beats, or no first step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "heartbeats.hpp"

namespace tenax::launch {

struct HangSettings {
  bool enabled = true;         // false (--hang-timeout 0): no silent or stalled verdict once the ranks run
  double fixed_timeout_s = 0;  // 0: derived
  double min_timeout_s = 30;
  double factor = 10;
  double startup_timeout_s = 600;
};

struct HangVerdict {
  enum class Kind { Silent, Stalled, NotStarted } kind;
  std::vector<int> ranks;          // the culprits (empty: no single culprit)
  std::vector<std::string> nodes;  // their nodes, same order
  std::string description;         // one line for the log
  // Silent: nodes every one of whose running ranks fell silent while ranks on another node kept beating. A rank's
  // heartbeat comes from a thread of its own, so a whole node of silent ranks is a node that died, froze or lost its
  // network, not a program that hangs: the node is to blame even before Slurm declares it down (which takes
  // SlurmdTimeout, usually longer than the hang timeout).
  std::vector<std::string> silent_nodes;
};

class HangDetector {
 public:
  HangDetector(HangSettings settings, int world_size, double start_s);

  void observe(const std::vector<Heartbeat>& beats, double now_s);
  std::optional<HangVerdict> check(double now_s) const;

  // The hang timeout in force; 0 when hang detection is disabled.
  double timeout_s() const;
  std::int64_t max_step() const { return max_step_; }
  bool any_step_completed() const { return first_step_s_ >= 0; }
  double first_beat_s() const { return first_beat_s_; }  // -1 until every rank beat once
  double first_step_s() const { return first_step_s_; }  // -1 until a step completed in this attempt
  double last_progress_s() const { return last_progress_s_; }
  // When this rank's heartbeat last changed (-1: never seen).
  double last_beat_s(int rank) const;

 private:
  struct Seen {
    bool known = false;
    std::uint64_t beat = 0;
    double beat_changed_s = 0;
    std::int64_t step = -1;
    std::uint64_t seq = 0;
    bool exited = false;
    std::string node;
  };
  // The nodes of `silent_ranks` none of whose running ranks beat in the last timeout/2, when some other node still
  // has a rank that did.
  std::vector<std::string> wholly_silent_nodes(const std::vector<int>& silent_ranks, double now_s,
                                               double timeout_s) const;

  HangSettings settings_;
  double start_s_;
  std::vector<Seen> ranks_;
  std::int64_t max_step_ = -1;
  std::int64_t resumed_step_ = -1;
  double last_progress_s_;
  double last_step_advance_s_ = -1;
  double slowest_step_s_ = 0;
  double first_beat_s_ = -1;
  double first_step_s_ = -1;
};

}  // namespace tenax::launch
