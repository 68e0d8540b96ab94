#include "core/failure_watchdog.hpp"

#include <algorithm>

#include "tenax/env.hpp"
#include "tenax/log.hpp"

namespace tenax::detail {

FailureWatchdog& FailureWatchdog::instance() {
  static FailureWatchdog watchdog(env::get_duration("TENAX_COMM_TIMEOUT"), true);
  return watchdog;
}

FailureWatchdog::FailureWatchdog(std::chrono::milliseconds timeout, bool with_thread)
    : timeout_(timeout), with_thread_(with_thread) {}

FailureWatchdog::~FailureWatchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void FailureWatchdog::add(Watched* w) {
  std::lock_guard lock(mutex_);
  watched_.push_back(w);
  if (with_thread_ && !thread_.joinable()) thread_ = std::thread([this] { run(); });
}

void FailureWatchdog::remove(Watched* w) {
  std::lock_guard lock(mutex_);
  watched_.erase(std::remove(watched_.begin(), watched_.end(), w), watched_.end());
}

std::optional<std::string> FailureWatchdog::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void FailureWatchdog::abort_all(const std::string& why) {
  std::vector<Watched*> all;
  {
    std::lock_guard lock(mutex_);
    if (!failure_) failure_ = why;
    all = watched_;
  }
  TENAX_LOG(Error, "comm") << why << "; aborting every communicator of this process (" << all.size() << ")";
  for (Watched* w : all)
    w->abort();
}

std::optional<std::string> FailureWatchdog::poll_once(Clock::time_point now) {
  std::vector<Watched*> all;
  {
    std::lock_guard lock(mutex_);
    all = watched_;
  }
  for (Watched* w : all) {
    std::string problem;
    const std::string error = w->async_error();
    if (!error.empty()) {
      problem = w->watched_name() + " reported an asynchronous error: " + error + "; a peer failed";
    } else if (timeout_.count() > 0) {
      const std::optional<Clock::time_point> oldest = w->oldest_pending();
      if (oldest && now - *oldest > timeout_)
        problem = w->watched_name() + " has an operation unfinished after " +
                  std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now - *oldest).count()) +
                  " ms (TENAX_COMM_TIMEOUT " + std::to_string(timeout_.count()) + " ms): a peer is dead or stuck";
    }
    if (!problem.empty()) {
      abort_all(problem);
      return problem;
    }
  }
  return std::nullopt;
}

void FailureWatchdog::run() {
  const auto period = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(timeout_ / 4),
                                 std::chrono::milliseconds(10), std::chrono::milliseconds(100));
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    if (failure_) continue;  // everything was aborted already
    lock.unlock();
    poll_once(Clock::now());
    lock.lock();
  }
}

}  // namespace tenax::detail
