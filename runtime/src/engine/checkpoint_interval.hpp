// The automatic checkpoint interval (CheckpointPolicy::automatic): the interval that loses the least expected time to
// checkpoints and failures together, Daly's higher-order form of Young's sqrt(2 C M).
//
//   J. W. Young, "A first order approximation to the optimum checkpoint interval", CACM 17(9), 1974.
//   J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3), 2006.
//
// Pure functions; the engine feeds them measured values every rank agrees on, so every rank picks the same step. The
// save-cost meters below keep one rank's own times; the engine agrees on them (the slowest rank's) before choosing.
#pragma once

#include <optional>
#include <string>

namespace tenax {

// Seconds of work between checkpoints for a blocking cost `cost_s` per checkpoint and a mean time between failures
// `mtbf_s`: sqrt(2 C M) * (1 + sqrt(C / 2M) / 3 + (C / 2M) / 9) - C while C < 2M, else M (Daly, eq. 37). Both inputs
// must be finite and > 0 (UsageError otherwise).
double daly_interval_s(double cost_s, double mtbf_s);

// That interval in whole steps of `step_s` seconds, rounded to the nearest, at least 1 and at most `max_steps`.
int interval_in_steps(double interval_s, double step_s, long max_steps);

// The automatic interval of a tier in steps: Daly's optimum for the blocking cost `cost_s` and the MTBF (in steps of
// `step_s`), but never fewer than the `steps_to_commit` steps the tier's last save was in flight (from its call to the
// progress() call that knew it committed), and at most `max_steps`. Saves no further apart than their writes take
// cannot all be written: on a slow shared file system (12 MB across a 100 Mbit/s link: about 20 steps of 60 ms) a
// cheap save (2 ms) gave Daly 8 steps, each next save then waited for the previous write, its cost measured 0.3 s gave
// 68 steps, cheap again, 6 steps: the interval swung between the two and training stalled at every short one. The
// write's time does not change the optimum otherwise: it delays each checkpoint's usefulness by the same amount
// whatever the interval.
int automatic_interval_steps(double cost_s, double mtbf_s, double step_s, long max_steps, int steps_to_commit);

// Whether an automatic shared save is taken at a step `steps_since` steps after the previous one, for an interval of
// `every` steps, while that previous save is or is not still in flight. A save due while it is (its write or commit
// outlasted the interval, as on a slow shared file system) waits for it to commit instead of blocking training on it
// in save(): the same moment of writing, a newer step and no stall. For at most one more interval: a write that never
// ends then blocks the save, where the launcher's hang detection sees it, rather than leaving the run without
// checkpoints. (Fixed intervals save at their steps whatever is in flight: the steps a user asked for.)
bool automatic_save_now(long steps_since, int every, bool previous_in_flight);

// Where the mean time between failures came from, for the log and the summary.
struct MtbfChoice {
  double seconds = 0;
  // "the program", "this run's failures (TENAX_RUN_MTBF)", "this run's failures beyond the node-local tier
  // (TENAX_RUN_SHARED_MTBF)", "TENAX_MTBF", "TENAX_NODE_MTBF (720h) over 8 nodes", "TENAX_MTBF's default"
  std::string source;
};

// Which failures a tier's interval must cover: every failure (the node-local tier, or the shared tier alone), or only
// those the node-local tier and its partner copies cannot (the shared tier beside a node-local one: a node lost with
// its partner, a requeue onto other nodes, a layout change, a damaged copy), when it saves at least as often.
enum class FailuresCovered { All, BeyondNodeLocal };

// The MTBF the automatic interval uses, the first that applies:
//   1. the program's own value (`configured_s` > 0);
//   2. what tenax-launch observed across this run's attempts, set only once a failure happened: TENAX_RUN_MTBF over
//      all failures, or for FailuresCovered::BeyondNodeLocal TENAX_RUN_SHARED_MTBF over those whose restart read the
//      shared tier (those not resumed from yet count as such; at least one). Both tiers assume the same MTBF until the
//      run has failed: what share of failures the node-local tier covers is known only from the run's own;
//   3. TENAX_MTBF, when set: the user's or the job's own figure;
//   4. TENAX_NODE_MTBF over `nodes`, when set (the site's per-node figure, exported by the SPANK plugin's
//      node_mtbf_hours): with independent failures, a job on N nodes fails N times as often as one node;
//   5. TENAX_MTBF's default (24 h).
// `nodes` is the number of nodes the run spans (at least 1).
MtbfChoice choose_mtbf(double configured_s, int nodes, FailuresCovered covered = FailuresCovered::All);

// What a save costs training, as the automatic interval counts it: the save() call and the progress() calls that carry
// the save afterwards (they agree on its write and commit; the node-local tier's also carry its partner copy). Counting
// the call alone made the node-local interval too short (2 steps where the tier's blocking time was 4 times the
// call's). The engine feeds each tier's meter the times it measured; a meter returns a save's measure once it is
// known, for the tier's next choice. Both tiers count the cost alike; they differ in when it is known.
struct SaveMeasure {
  double cost_s = 0;  // training time the save blocked
  // The shared tier's: steps (progress() calls) it was in flight; a lower bound when it still was at the next save.
  // The node-local tier gives none (0): its save settles the previous copy itself, and a copy that failed (a warning)
  // never commits, which would lengthen the interval by a step at every save.
  int steps_to_commit = 0;
};

// The shared tier: at the save's commit (the first progress() call after which it is no longer in flight), or at the
// next save if it is still in flight then (an interval shorter than a write and commit): its cost and steps so far
// (and one step more: it needs more than those), so that the interval still adapts; what is left of it blocks the
// next save's call and counts as that one's.
class SharedSaveCost {
 public:
  // Called just before a shared save: the measure so far of the previous save, when it is still being measured.
  std::optional<SaveMeasure> before_save();
  // The save's call returned after `call_s` seconds.
  void saved(double call_s);
  // A progress() call took `poll_s` seconds; a checkpoint was in flight before it (`in_flight_before`) and still is
  // after it (`in_flight_after`). Returns the save's measure once it has committed.
  std::optional<SaveMeasure> polled(double poll_s, bool in_flight_before, bool in_flight_after);
  // A save or its write failed: no measure of a save's cost.
  void failed();

 private:
  double call_s_ = -1;  // the save being measured: its call; -1 when none is
  double polls_s_ = 0;  // progress() time while it was in flight
  int polls_ = 0;       // progress() calls while it was in flight
};

// The node-local tier: at the next node-local save, from the call and the progress() calls in between that were the
// node-local tier's (the engine leaves out those with a shared save or write in flight: they are the shared tier's).
class LocalSaveCost {
 public:
  // A node-local save's call returned after `call_s` seconds: the previous save's measure, if there was one.
  std::optional<SaveMeasure> saved(double call_s);
  // A progress() call of the node-local tier took `poll_s` seconds.
  void polled(double poll_s) { polls_s_ += poll_s; }

 private:
  double call_s_ = -1;  // the last save's call; -1 before the first
  double polls_s_ = 0;  // progress() time since it
};

}  // namespace tenax
