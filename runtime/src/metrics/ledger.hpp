// Internal: reading the launcher's ledger (<run_dir>/ledger.jsonl, written by tenax-launch) and computing goodput
// across restarts. docs/metrics.md ("The launcher ledger") lists exactly the records and fields read here.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tenax::metrics::detail {

// One finished attempt ("event":"attempt" line; the launcher writes it when the attempt has ended).
struct LedgerAttempt {
  int attempt = 0;
  double start = 0;         // unix seconds
  double end = 0;           // unix seconds
  double productive_s = 0;  // step time of the attempt
  double work_lost_s = 0;   // part of it rolled back (steps after the newest checkpoint)
};

struct Ledger {
  std::vector<LedgerAttempt> attempts;  // in file order; a later line for the same attempt number replaces one
  double first_time = 0;                // earliest "start" time of an invocation or attempt (0: none)
};

// A missing file gives an empty ledger; a line that is not a valid record is skipped with a warning naming it.
Ledger read_ledger(const std::string& path);

struct Goodput {
  int attempts = 0;         // finished attempts in the ledger
  double productive_s = 0;  // sum of (productive_s - work_lost_s) over them, plus this attempt's measured step time
  double lost_s = 0;        // sum of work_lost_s
  double wall_s = 0;        // from the ledger's first time to now
  double goodput = 0;       // productive_s / wall_s, clamped to [0, 1]
};

// Nullopt when the ledger has no record at all. `this_attempt_productive_s` is the step time measured by the running
// attempt, whose "attempt" line the launcher writes only after it ends.
std::optional<Goodput> compute_goodput(const Ledger& ledger, double this_attempt_productive_s, double now_unix);

}  // namespace tenax::metrics::detail
