// The automatic checkpoint interval (CheckpointPolicy::automatic): the interval that loses the least expected time to
// checkpoints and failures together, Daly's higher-order form of Young's sqrt(2 C M).
//
//   J. W. Young, "A first order approximation to the optimum checkpoint interval", CACM 17(9), 1974.
//   J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3), 2006.
//
// Pure functions; the engine feeds them measured values every rank agrees on, so every rank picks the same step.
#pragma once

#include <string>

namespace tenax {

// Seconds of work between checkpoints for a blocking cost `cost_s` per checkpoint and a mean time between failures
// `mtbf_s`: sqrt(2 C M) * (1 + sqrt(C / 2M) / 3 + (C / 2M) / 9) - C while C < 2M, else M (Daly, eq. 37). Both inputs
// must be finite and > 0 (UsageError otherwise).
double daly_interval_s(double cost_s, double mtbf_s);

// That interval in whole steps of `step_s` seconds, rounded to the nearest, at least 1 and at most `max_steps`.
int interval_in_steps(double interval_s, double step_s, long max_steps);

// Where the mean time between failures came from, for the log and the summary.
struct MtbfChoice {
  double seconds = 0;
  // "the program", "this run's failures (TENAX_RUN_MTBF)", "this run's failures beyond the node-local tier
  // (TENAX_RUN_SHARED_MTBF)", "TENAX_MTBF", "TENAX_NODE_MTBF (720h) over 8 nodes", "TENAX_MTBF's default"
  std::string source;
};

// Which failures a tier's interval must cover: every failure (the node-local tier, or the shared tier alone), or only
// those the node-local tier and its partner copies cannot (the shared tier beside a node-local one: a node lost with
// its partner, a requeue onto other nodes, a layout change, a damaged copy).
enum class FailuresCovered { All, BeyondNodeLocal };

// The MTBF the automatic interval uses, the first that applies:
//   1. the program's own value (`configured_s` > 0);
//   2. what tenax-launch observed across this run's attempts, set only once a failure happened: TENAX_RUN_MTBF over
//      all failures, or for FailuresCovered::BeyondNodeLocal TENAX_RUN_SHARED_MTBF over those whose restart read the
//      shared tier (counting at least one). Both tiers assume the same MTBF until the run has failed: what share of
//      failures the node-local tier covers is known only from the run's own;
//   3. TENAX_MTBF, when set: the user's or the job's own figure;
//   4. TENAX_NODE_MTBF over `nodes`, when set (the site's per-node figure, exported by the SPANK plugin's
//      node_mtbf_hours): with independent failures, a job on N nodes fails N times as often as one node;
//   5. TENAX_MTBF's default (24 h).
// `nodes` is the number of nodes the run spans (at least 1).
MtbfChoice choose_mtbf(double configured_s, int nodes, FailuresCovered covered = FailuresCovered::All);

}  // namespace tenax
