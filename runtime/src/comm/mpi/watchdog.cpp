#include "comm/mpi/watchdog.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm_state.hpp"
#include "tenax/log.hpp"
#include "tenax/runtime.hpp"

namespace tenax::detail {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// One thread per process, started with the first watched communicator (never when TENAX_COMM_TIMEOUT is 0).
class Watchdog {
 public:
  static Watchdog& instance() {
    static Watchdog watchdog;
    return watchdog;
  }

  void add(OperationSlot* slot) {
    std::lock_guard lock(mutex_);
    slots_.push_back(slot);
    if (!thread_.joinable() && timeout_.count() > 0) thread_ = std::thread([this] { run(); });
  }

  void remove(OperationSlot* slot) {
    std::lock_guard lock(mutex_);
    slots_.erase(std::remove(slots_.begin(), slots_.end(), slot), slots_.end());
  }

  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  Watchdog() : timeout_(comm_timeout()) {}

  void run() {
    // Checking four times per timeout keeps the detection within 25% of TENAX_COMM_TIMEOUT (and at most a second).
    const auto period = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(timeout_ / 4),
                                   std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
    const std::int64_t limit_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout_).count();
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
      const std::int64_t now = now_ns();
      for (OperationSlot* slot : slots_) {
        const std::int64_t started = slot->started_ns_.load(std::memory_order_acquire);
        if (started != 0 && now - started > limit_ns) expire(*slot, started, now);
      }
    }
  }

  [[noreturn]] void expire(const OperationSlot& slot, std::int64_t started, std::int64_t now) {
    mark_communicator_aborted();
    const double waited = static_cast<double>(now - started) / 1e9;
    const std::string what =
        describe_operation(slot.comm_, slot.op_.load(), slot.sequence_.load(), slot.count_.load(), slot.dtype_.load());
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", waited);
    TENAX_LOG(Error, "comm") << what << " did not complete within TENAX_COMM_TIMEOUT (waited " << seconds
                             << " s): a peer in this group is dead, stuck, or issued a different operation; look for "
                                "the first error among the group's ranks, or raise TENAX_COMM_TIMEOUT if steps "
                                "legitimately take longer. Ending this process (exit "
                             << kExitPeerFailure << ") so that the job can restart.";
    std::fflush(nullptr);
    // The stuck call cannot be interrupted and MPI cannot be finalised around it: leave at once.
    _exit(kExitPeerFailure);
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<OperationSlot*> slots_;
  std::thread thread_;
  bool stopping_ = false;
  const std::chrono::milliseconds timeout_;
};

OperationSlot::OperationSlot(const Communicator& comm) : comm_(comm) {
  Watchdog::instance().add(this);
}

OperationSlot::~OperationSlot() {
  Watchdog::instance().remove(this);
}

void OperationSlot::start(const char* op, std::uint64_t sequence, std::size_t count, DType dtype) {
  op_.store(op, std::memory_order_relaxed);
  sequence_.store(sequence, std::memory_order_relaxed);
  count_.store(count, std::memory_order_relaxed);
  dtype_.store(dtype, std::memory_order_relaxed);
  started_ns_.store(now_ns(), std::memory_order_release);
}

}  // namespace tenax::detail
