// The goodput ledger: <run-dir>/ledger.jsonl, one JSON object per line, appended (and fsynced) by tenax-launch at the
// start of every invocation, at the end of every attempt and at the end of every invocation. It survives restarts
// and Slurm requeues; the format is specified in docs/worker-protocol.md (other tools read it).
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "restart_progress.hpp"

namespace tenax::launch {

// What the launcher needs from earlier invocations of the same run directory.
struct LedgerHistory {
  int invocations = 0;       // "start" records
  int attempts = 0;          // "attempt" records
  int last_attempt = 0;      // the highest attempt number they carry (the next attempt is numbered after it)
  int failed_restarts = 0;   // failed attempts since the last invocation that ended other than preempted
  ProgressTracker progress;  // restart-loop state: every attempt replayed on the basis it was judged on
  // The text's last line has no newline; torn_tail_bytes > 0 when that line is no record (an append cut short by a
  // crash or a full disk), which was skipped.
  bool unterminated_tail = false;
  std::size_t torn_tail_bytes = 0;
};

struct GoodputSummary {
  double wall_s = 0;        // first start to last end, requeue waits included
  double productive_s = 0;  // step time that was kept (lost work subtracted)
  double detect_s = 0, teardown_s = 0, relaunch_s = 0, load_s = 0;
  double work_lost_s = 0, checkpoint_stall_s = 0, backoff_s = 0, requeue_wait_s = 0;
  // Of checkpoint_stall_s: the checkpoints that ended attempts (the last of training, the emergency ones on
  // preemption), shown apart: paid once per end or preemption, whatever the interval.
  double final_checkpoint_s = 0;
  double other_s = 0;  // the rest: launcher start-up, final teardown, time not attributed
  int invocations = 0, attempts = 0, failures = 0, preemptions = 0;
  // Failures after which the run resumed from the shared tier: the first attempt after them that resumed read it
  // (an attempt that did not say which tier it read counts as shared). With a node-local tier, the failures it could
  // not cover.
  int shared_tier_recoveries = 0;
  // Failures after the last attempt that resumed: what they need is not known yet.
  int unresumed_failures = 0;
  // Checkpoints committed over every attempt, per tier (records without the counts add none).
  long long shared_saves = 0, local_saves = 0;
  double goodput() const { return wall_s > 0 ? productive_s / wall_s : 0; }
};

class Ledger {
 public:
  // Reads the existing ledger, if any. Throws IoError when it cannot be opened, UsageError naming the line that is not
  // a record (and the way out: another run directory). An unfinished last record (no newline, the start of a record)
  // is cut off the file, and a whole last record without its newline gets one, so that the next append starts a line
  // of its own; repair_note() then says what was cut.
  explicit Ledger(std::string path);

  const LedgerHistory& history() const { return history_; }
  const std::string& repair_note() const { return repair_note_; }
  const std::string& path() const { return path_; }

  // Appends one record (a JSON object from json::ObjectWriter, no newline) as one line with O_APPEND and fsyncs it.
  // Throws IoError.
  void append(const std::string& record);

 private:
  std::string path_;
  LedgerHistory history_;
  std::string repair_note_;
};

// Replays a ledger's lines into the goodput summary. Throws IoError.
GoodputSummary summarize_ledger(const std::string& path);
// The same for ledger text; `path` names it in errors.
GoodputSummary summarize_ledger(std::istream& in, const std::string& path);

// Replays ledger text into the history the next invocation starts from. Throws IoError naming `path` and the line.
LedgerHistory read_ledger_history(std::istream& in, const std::string& path);

// The end-of-run table: goodput and the breakdown, one line per cause.
std::string format_summary(const GoodputSummary& summary);

// `text` as the ledger can hold it: the ledger is read back with a strict JSON reader, which refuses text that is not
// UTF-8, and its strings come from outside (the program's arguments, its ranks' output, scontrol's messages). Each byte
// that does not start a well-formed UTF-8 sequence becomes U+FFFD; valid text is returned unchanged.
std::string ledger_text(std::string_view text);

// Outcomes that count as failures (relaunched, limited by --max-restarts).
bool is_failure_outcome(const std::string& outcome);

}  // namespace tenax::launch
