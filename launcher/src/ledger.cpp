#include "ledger.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "flat_json.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

constexpr int kPreemptedExit = 75;

template <class Visit>
void for_each_record(const std::string& path, Visit visit) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return;
    throw IoError("opening the ledger '" + path + "' failed: " + std::strerror(errno));
  }
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    visit(FlatJson::parse(line, path + " line " + std::to_string(number)));
  }
}

}  // namespace

bool is_failure_outcome(const std::string& outcome) {
  return outcome == "crash" || outcome == "hang" || outcome == "node-lost" || outcome == "peer-failure";
}

Ledger::Ledger(std::string path) : path_(std::move(path)) {
  for_each_record(path_, [this](const FlatJson& record) {
    const std::string event = record.string("event");
    if (event == "start") {
      ++history_.invocations;
    } else if (event == "attempt") {
      ++history_.attempts;
      const std::int64_t max_step = record.integer("max_step", -1);
      const bool progressed = max_step > history_.best_step;
      history_.best_step = std::max(history_.best_step, max_step);
      if (is_failure_outcome(record.string("outcome"))) {
        ++history_.failed_restarts;
        history_.no_progress_streak = progressed ? 0 : history_.no_progress_streak + 1;
      } else if (progressed) {
        history_.no_progress_streak = 0;
      }
    } else if (event == "end" && record.integer("exit_code") != kPreemptedExit) {
      // The run was stopped on purpose (done, usage error, gave up): a new invocation starts with fresh limits.
      history_.failed_restarts = 0;
      history_.no_progress_streak = 0;
    }
  });
}

void Ledger::append(const std::string& line) {
  int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError("opening the ledger '" + path_ + "' failed: " + std::strerror(errno));
  std::size_t done = 0;
  while (done < line.size()) {
    ssize_t n = write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int saved = errno;
      close(fd);
      throw IoError("appending to the ledger '" + path_ + "' failed: " + std::strerror(saved));
    }
    done += static_cast<std::size_t>(n);
  }
  fsync(fd);  // best effort: a lost ledger line costs accounting, not training
  close(fd);
}

GoodputSummary summarize_ledger(const std::string& path) {
  GoodputSummary s;
  double invocation_start = -1, last_time = -1, previous_end = -1, previous_exit = -1;
  auto close_invocation = [&] {
    if (invocation_start >= 0 && last_time >= invocation_start) s.wall_s += last_time - invocation_start;
  };
  for_each_record(path, [&](const FlatJson& r) {
    const std::string event = r.string("event");
    if (event == "start") {
      close_invocation();
      const double start = r.number("time");
      // The gap between a preempted invocation and its requeued successor is lost to the preemption.
      if (previous_end >= 0 && previous_exit == kPreemptedExit && start > previous_end) {
        s.requeue_wait_s += start - previous_end;
        s.wall_s += start - previous_end;
      }
      invocation_start = start;
      last_time = start;
      previous_end = -1;
      ++s.invocations;
    } else if (event == "attempt") {
      ++s.attempts;
      const std::string outcome = r.string("outcome");
      if (is_failure_outcome(outcome)) ++s.failures;
      if (outcome == "preempted") ++s.preemptions;
      const double lost = r.number("work_lost_s");
      s.productive_s += std::max(0.0, r.number("productive_s") - lost);
      s.work_lost_s += lost;
      s.detect_s += r.number("detect_s");
      s.teardown_s += r.number("teardown_s");
      s.relaunch_s += r.number("relaunch_s");
      s.load_s += r.number("load_s");
      s.checkpoint_stall_s += r.number("checkpoint_stall_s");
      s.backoff_s += r.number("backoff_s");
      last_time = std::max(last_time, r.number("end") + r.number("backoff_s"));
    } else if (event == "end") {
      last_time = std::max(last_time, r.number("time"));
      previous_end = r.number("time");
      previous_exit = static_cast<double>(r.integer("exit_code"));
    }
  });
  close_invocation();
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
  return std::string(head) + row("productive steps", s.productive_s) + row("checkpoint stalls", s.checkpoint_stall_s) +
         row("work lost (rollback)", s.work_lost_s) + row("failure detection", s.detect_s) +
         row("teardown", s.teardown_s) + row("relaunch", s.relaunch_s) + row("checkpoint load", s.load_s) +
         row("backoff", s.backoff_s) + row("requeue wait", s.requeue_wait_s) + row("other", s.other_s);
}

}  // namespace tenax::launch
