#include "ledger.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/file_system.hpp"
#include "core/json.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

constexpr int kPreemptedExit = 75;
constexpr std::size_t kLongestTornRecord = 1 << 20;

// How the ledger text ended.
struct LedgerTail {
  std::size_t torn_bytes = 0;  // a last line without its newline that is no record: an append cut short, skipped
  bool unterminated = false;   // the last line has no newline (whole or torn)
};

// Calls visit(record, origin) for every line of the ledger text `in`. A line that is not a JSON object, or a field of
// the wrong kind, throws IoError naming the file and line: the ledger is tenax-launch's own record, a damaged one is
// reported. The one exception is a last line without its newline that does not parse: what an append cut short by a
// crash, a kill or a full disk leaves (each record is one write ending in its newline), skipped and returned.
template <class Visit>
LedgerTail for_each_record(std::istream& in, const std::string& path, Visit visit) {
  LedgerTail tail;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    tail.unterminated = in.eof();  // getline stopped at the end of the text, not at a newline
    if (line.empty()) continue;
    const std::string origin = path + " line " + std::to_string(number);
    json::Value record;
    try {
      record = json::Value::parse(line);
    } catch (const json::ParseError& error) {
      // What an append cut short leaves: the start of a record (or, on some file systems after a crash, zeros), and
      // never more than a record's worth.
      const bool record_start = line.front() == '{' || line.find_first_not_of('\0') == std::string::npos;
      if (tail.unterminated && record_start && line.size() <= kLongestTornRecord) {
        tail.torn_bytes = line.size();
        break;
      }
      throw IoError("cannot read '" + origin + "': " + error.what() +
                    " (the file is not a record tenax wrote, or it was damaged)");
    }
    if (record.kind() != json::Value::Kind::Object) {
      throw IoError("cannot read '" + origin + "': a ledger line must be a JSON object");
    }
    try {
      visit(record, origin);
    } catch (const json::Error& error) {
      throw IoError("'" + origin + "': " + error.what());
    }
  }
  return tail;
}

}  // namespace

std::string ledger_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char lead = byte(i);
    // Length and the allowed range of the second byte (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF).
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (lead < 0x80) {
      length = 1;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    }
    bool valid = length > 0 && text.size() - i >= length;
    for (std::size_t k = 1; valid && k < length; ++k) {
      const unsigned char next = byte(i + k);
      valid = next >= (k == 1 ? low : 0x80) && next <= (k == 1 ? high : 0xBF);
    }
    if (valid) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD in place of the one byte; the next byte starts afresh
      ++i;
    }
  }
  return out;
}

bool is_failure_outcome(const std::string& outcome) {
  return outcome == "crash" || outcome == "hang" || outcome == "node-lost" || outcome == "peer-failure";
}

Ledger::Ledger(std::string path) : path_(std::move(path)) {
  std::ifstream in(path_);
  if (!in) {
    if (errno == ENOENT) return;
    throw IoError("opening the ledger '" + path_ + "' failed: " + std::strerror(errno));
  }
  std::error_code size_error;
  const auto size_read = std::filesystem::file_size(path_, size_error);
  try {
    history_ = read_ledger_history(in, path_);
  } catch (const IoError& damaged) {
    // The run's own accounting cannot be read: going on would judge restarts and goodput wrongly. Nothing is lost by
    // starting it afresh elsewhere.
    throw UsageError(std::string(damaged.what()) + "; the run directory's ledger cannot be continued: give another " +
                     "--run-dir, or move '" + path_ + "' aside to start the run's accounting afresh");
  }
  in.close();
  if (!history_.unterminated_tail) return;
  // The next record must start a line of its own: a torn record is cut off (it was never written whole, so nothing
  // saved is lost), a whole one gets its newline.
  const int fd = open(path_.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw IoError("opening the ledger '" + path_ + "' failed: " + std::strerror(errno));
  try {
    if (history_.torn_tail_bytes > 0) {
      // Only the bytes that were read: a ledger that grew meanwhile has another writer (two launchers on one run
      // directory), and its new record is not ours to cut.
      const auto size = static_cast<std::uintmax_t>(lseek(fd, 0, SEEK_END));
      if (size_error || size != size_read || size < history_.torn_tail_bytes)
        throw UsageError("the ledger '" + path_ +
                         "' changed while it was read: is another tenax-launch using --run-dir " +
                         std::filesystem::path(path_).parent_path().string() + "?");
      if (ftruncate(fd, static_cast<off_t>(size - history_.torn_tail_bytes)) != 0)
        throw IoError("cutting the unfinished last record off the ledger '" + path_ +
                      "' failed: " + std::strerror(errno));
      repair_note_ = "the ledger '" + path_ + "' ended in an unfinished record of " +
                     std::to_string(history_.torn_tail_bytes) +
                     " bytes (an append cut short by a crash or a full disk): cut off";
    } else {
      if (lseek(fd, 0, SEEK_END) < 0) throw IoError("seeking in the ledger '" + path_ + "' failed");
      fs::write_all(fd, "\n", path_);
    }
  } catch (...) {
    close(fd);
    throw;
  }
  fsync(fd);
  close(fd);
  history_.torn_tail_bytes = 0;
  history_.unterminated_tail = false;
}

LedgerHistory read_ledger_history(std::istream& in, const std::string& path) {
  LedgerHistory history;
  const LedgerTail tail = for_each_record(in, path, [&history](const json::Value& record, const std::string& origin) {
    const std::string event = record.string_or("event", "");
    if (event == "start") {
      ++history.invocations;
    } else if (event == "attempt") {
      ++history.attempts;
      history.last_attempt = std::max(
          history.last_attempt, static_cast<int>(std::clamp<std::int64_t>(record.i64_or("attempt", 0), 0, 1 << 30)));
      const bool failed = is_failure_outcome(record.string_or("outcome", ""));
      if (failed) ++history.failed_restarts;
      // Records of launchers that judged progress by heartbeats only have no "progress_by"; their "checkpoint_step"
      // is what the heartbeats said was committed.
      const std::string basis_name = record.string_or("progress_by", "heartbeat");
      const auto basis = parse_progress_basis(basis_name);
      if (!basis) {
        throw IoError("'" + origin + "': an attempt record has \"progress_by\": \"" + basis_name +
                      "\" (expected \"checkpoint\" or \"heartbeat\"): the ledger was written by another program");
      }
      history.progress.record(*basis, {record.i64_or("max_step", -1), record.i64_or("checkpoint_step", -1)}, failed);
    } else if (event == "end" &&
               (record.i64_or("exit_code", 0) != kPreemptedExit || record.bool_or("cancelled", false))) {
      // The run was stopped on purpose (done, usage error, gave up, the job cancelled by its user): a new invocation
      // starts with fresh limits.
      history.failed_restarts = 0;
      history.progress.reset_streak();
    }
  });
  history.torn_tail_bytes = tail.torn_bytes;
  history.unterminated_tail = tail.unterminated;
  return history;
}

void Ledger::append(const std::string& record) {
  const std::string line = record + "\n";
  int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError("opening the ledger '" + path_ + "' failed: " + std::strerror(errno));
  try {
    fs::write_all(fd, line, path_);
  } catch (const IoError& e) {
    close(fd);
    throw IoError("appending to the ledger failed: " + std::string(e.what()));
  }
  fsync(fd);  // best effort: a lost ledger line costs accounting, not training
  close(fd);
}

GoodputSummary summarize_ledger(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return {};
    throw IoError("opening the ledger '" + path + "' failed: " + std::strerror(errno));
  }
  return summarize_ledger(in, path);
}

GoodputSummary summarize_ledger(std::istream& in, const std::string& path) {
  GoodputSummary s;
  double invocation_start = -1, last_time = -1, previous_end = -1, previous_exit = -1;
  bool previous_cancelled = false;
  int unresumed = 0;  // failures since the last attempt that got as far as resuming
  auto close_invocation = [&] {
    if (invocation_start >= 0 && last_time >= invocation_start) s.wall_s += last_time - invocation_start;
  };
  for_each_record(in, path, [&](const json::Value& r, const std::string&) {
    const std::string event = r.string_or("event", "");
    if (event == "start") {
      close_invocation();
      const double start = r.number_or("time", 0);
      // The gap between a preempted invocation and its requeued successor is lost to the preemption. After a job its
      // user cancelled, the gap until the job is submitted again is the user's choice, not the run's time.
      if (previous_end >= 0 && previous_exit == kPreemptedExit && !previous_cancelled && start > previous_end) {
        s.requeue_wait_s += start - previous_end;
        s.wall_s += start - previous_end;
      }
      invocation_start = start;
      last_time = start;
      previous_end = -1;
      ++s.invocations;
    } else if (event == "attempt") {
      ++s.attempts;
      const std::string outcome = r.string_or("outcome", "");
      // The first attempt after failures that got as far as resuming says what they needed: a checkpoint from the
      // shared tier, one from the node-local tier, or none (a fresh start: nothing was saved yet).
      const std::int64_t resumed = r.i64_or("resumed_step", -1);
      if (resumed >= 0) {
        if (resumed > 0 && r.string_or("resumed_tier", "shared") != "node-local") s.shared_tier_recoveries += unresumed;
        unresumed = 0;
      }
      if (is_failure_outcome(outcome)) {
        ++s.failures;
        ++unresumed;
      }
      if (outcome == "preempted") ++s.preemptions;
      const double lost = r.number_or("work_lost_s", 0);
      s.productive_s += std::max(0.0, r.number_or("productive_s", 0) - lost);
      s.work_lost_s += lost;
      s.detect_s += r.number_or("detect_s", 0);
      s.teardown_s += r.number_or("teardown_s", 0);
      s.relaunch_s += r.number_or("relaunch_s", 0);
      s.load_s += r.number_or("load_s", 0);
      s.checkpoint_stall_s += r.number_or("checkpoint_stall_s", 0);
      s.final_checkpoint_s +=
          std::clamp(r.number_or("final_checkpoint_s", 0), 0.0, std::max(0.0, r.number_or("checkpoint_stall_s", 0)));
      s.shared_saves += std::max<std::int64_t>(0, r.i64_or("shared_saves", 0));
      s.local_saves += std::max<std::int64_t>(0, r.i64_or("local_saves", 0));
      s.backoff_s += r.number_or("backoff_s", 0);
      last_time = std::max(last_time, r.number_or("end", 0) + r.number_or("backoff_s", 0));
    } else if (event == "end") {
      // A backoff cut short by a preemption: its attempt record counted all of it, also past the invocation's end.
      const double unused = std::clamp(r.number_or("backoff_unused_s", 0), 0.0, s.backoff_s);
      s.backoff_s -= unused;
      last_time = std::max(last_time - unused, r.number_or("time", 0));
      previous_end = r.number_or("time", 0);
      previous_exit = static_cast<double>(r.i64_or("exit_code", 0));
      previous_cancelled = r.bool_or("cancelled", false);
    }
  });
  close_invocation();
  s.unresumed_failures = unresumed;
  const double attributed = s.productive_s + s.work_lost_s + s.detect_s + s.teardown_s + s.relaunch_s + s.load_s +
                            s.checkpoint_stall_s + s.backoff_s + s.requeue_wait_s;
  s.other_s = std::max(0.0, s.wall_s - attributed);
  return s;
}

std::string format_summary(const GoodputSummary& s) {
  auto row = [&](const char* name, double seconds) {
    char buffer[128];
    std::snprintf(buffer, sizeof buffer, "  %-22s %10.2f s  %5.1f %%\n", name, seconds,
                  s.wall_s > 0 ? 100.0 * seconds / s.wall_s : 0.0);
    return std::string(buffer);
  };
  char head[256];
  std::snprintf(head, sizeof head,
                "goodput %.1f %% (productive %.2f s of %.2f s wall; %d invocation(s), %d attempt(s), %d failure(s), "
                "%d preemption(s))\n",
                100.0 * s.goodput(), s.productive_s, s.wall_s, s.invocations, s.attempts, s.failures, s.preemptions);
  char saves[160];
  std::snprintf(saves, sizeof saves, "checkpoints committed: %lld shared, %lld node-local\n", s.shared_saves,
                s.local_saves);
  return std::string(head) + saves + row("productive steps", s.productive_s) +
         row("checkpoint stalls", s.checkpoint_stall_s - s.final_checkpoint_s) +
         row("final checkpoints", s.final_checkpoint_s) + row("work lost (rollback)", s.work_lost_s) +
         row("failure detection", s.detect_s) + row("teardown", s.teardown_s) + row("relaunch", s.relaunch_s) +
         row("checkpoint load", s.load_s) + row("backoff", s.backoff_s) + row("requeue wait", s.requeue_wait_s) +
         row("other", s.other_s);
}

}  // namespace tenax::launch
