// Internal: the process-wide watchdog of asynchronous communicators (NCCL), in the manner of PyTorch's NCCL process
// group watchdog. Every live communicator registers itself; one thread polls each one's asynchronous error and its
// oldest unfinished operation, and on the first error, or an operation older than TENAX_COMM_TIMEOUT, aborts EVERY
// registered communicator: a rank whose tensor-parallel peer died must not be left spinning on its data-parallel
// group. Host waits for device work (tensor/device_wait.hpp) consult the same watchdog, so none can outlive a failure.
//
// Generic on purpose (no CUDA or NCCL here): the backends implement Watched, and the tests drive poll_once() with fake
// ones and an injected clock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tenax::detail {

class Watched {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~Watched() = default;
  virtual std::string watched_name() const = 0;  // "group 'tp[0,1]' (nccl, rank 1 of 2)"
  // The asynchronous error the backend reports, or "" while healthy. Called from the watchdog thread.
  virtual std::string async_error() = 0;
  // When the oldest operation not finished yet was issued (nothing when all are finished). Watchdog thread.
  virtual std::optional<Clock::time_point> oldest_pending() = 0;
  // Aborts the communicator (idempotent; from any thread): operations stuck on it are released and fail.
  virtual void abort() = 0;
};

class FailureWatchdog {
 public:
  using Clock = std::chrono::steady_clock;
  // The process's watchdog, polling every min(timeout / 4, 100 ms) once something is registered.
  static FailureWatchdog& instance();
  // A watchdog with its own clock and no thread (tests).
  explicit FailureWatchdog(std::chrono::milliseconds timeout, bool with_thread = false);
  ~FailureWatchdog();
  FailureWatchdog(const FailureWatchdog&) = delete;
  FailureWatchdog& operator=(const FailureWatchdog&) = delete;

  void add(Watched* w);
  void remove(Watched* w);
  // One round of checks at `now`; returns the failure it found (and acted on) this round, if any.
  std::optional<std::string> poll_once(Clock::time_point now);
  // Records `why` as the process's failure (if it is the first) and aborts every registered communicator.
  void abort_all(const std::string& why);
  // The first failure seen (async error, timed-out operation, or an abort_all), if any.
  std::optional<std::string> failure() const;
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  void run();

  std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Watched*> watched_;
  std::optional<std::string> failure_;
  bool with_thread_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tenax::detail
