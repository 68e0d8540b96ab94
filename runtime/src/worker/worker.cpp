// Worker: the training thread records progress under a mutex; a background thread turns it into heartbeat files.
// Why a thread and not a write from heartbeat(): a rank blocked inside a collective must keep reporting its live
// collective sequence number, otherwise the launcher could not tell the laggard of a hang from the ranks waiting on it.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "tenax/communicator.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"
#include "tenax/worker.hpp"
#include "worker/heartbeat_file.hpp"

namespace tenax::worker {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

void make_directory(const std::string& path) {
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    throw IoError("creating the heartbeat directory '" + path + "' failed: " + std::strerror(errno) +
                  " (TENAX_RUN_DIR must name a directory every rank can write)");
  }
}

// How often the heartbeat thread checks for a preemption signal between regular beats.
constexpr auto kSignalPoll = std::chrono::milliseconds(20);

}  // namespace

class Worker::Impl {
 public:
  explicit Impl(int rank) : info_(launch_info()) {
    record_.rank = rank;
    record_.node = info_.node;
    record_.pid = static_cast<long>(getpid());
    record_.attempt = info_.attempt;
    last_mark_ = Clock::now();
    if (!info_.supervised) return;
    interval_ = env::get_duration("TENAX_HEARTBEAT_INTERVAL");
    if (interval_.count() <= 0) {
      throw UsageError("TENAX_HEARTBEAT_INTERVAL must be positive under tenax-launch (e.g. 1s)");
    }
    make_directory(info_.run_dir + "/heartbeat");
    make_directory(heartbeat_dir(info_.run_dir, info_.attempt));  // the launcher creates it; ranks race to be sure
    path_ = heartbeat_path(info_.run_dir, info_.attempt, rank);
    write_now();  // the launcher measures relaunch time up to this first beat
    writer_ = std::thread([this] { beat_until_stopped(); });
  }

  ~Impl() { stop_writer(); }

  const LaunchInfo& info() const { return info_; }

  void resumed_from(std::int64_t step, double load_seconds, CheckpointTier tier) {
    std::lock_guard lock(mutex_);
    record_.resumed_step = step;
    record_.resumed_tier = step <= 0 ? "" : tier == CheckpointTier::NodeLocal ? "node-local" : "shared";
    record_.step = step;
    record_.load_s += load_seconds;
    last_mark_ = Clock::now();
    urgent_ = true;  // the launcher times the load from this beat
    wake_.notify_all();
  }

  void heartbeat(std::int64_t step) {
    auto now = Clock::now();
    std::lock_guard lock(mutex_);
    record_.productive_s += std::max(0.0, seconds_between(last_mark_, now));
    // A stall is reported with the commit that follows it, usually after the heartbeats that already counted its time
    // as productive: all of it comes off the total here, however many steps it spanned.
    const double taken = std::min(stall_not_deducted_, record_.productive_s);
    record_.productive_s -= taken;
    stall_not_deducted_ -= taken;
    record_.step = step;
    ++record_.steps_done;
    last_mark_ = now;
    if (record_.steps_done == 1) {
      urgent_ = true;  // the first step after a (re)start ends the launcher's restart-latency clock
      wake_.notify_all();
    }
  }

  void checkpoint_committed(std::int64_t step, double stall_seconds, double final_seconds) {
    std::lock_guard lock(mutex_);
    record_.checkpoint_step = step;
    record_.checkpoint_stall_s += stall_seconds;
    const double final_part = std::clamp(final_seconds, 0.0, std::max(0.0, stall_seconds));
    record_.final_checkpoint_s += final_part;
    // The final checkpoint comes after the last heartbeat: no step time counted it. The rest of the stall fell in the
    // steps before and comes off their time (at the next heartbeat, or in finish()).
    if (stall_seconds > final_part) stall_not_deducted_ += stall_seconds - final_part;
  }

  void checkpoint_counts(std::int64_t shared, std::int64_t node_local) {
    std::lock_guard lock(mutex_);
    record_.shared_saves = shared;
    record_.local_saves = node_local;
  }

  int finish(int exit_code) {
    stop_writer();
    if (info_.supervised) {
      {
        std::lock_guard lock(mutex_);
        record_.exit_code = exit_code;
        // A stall reported after the last heartbeat (with the final commit) still comes off the steps it fell in.
        const double taken = std::min(stall_not_deducted_, record_.productive_s);
        record_.productive_s -= taken;
        stall_not_deducted_ -= taken;
      }
      write_now();
    }
    return exit_code;
  }

 private:
  // The file is written without holding mutex_: a write stalled on a slow or hung file server must not stall the
  // training thread in heartbeat(). Only this thread writes while it runs (the constructor writes before it starts,
  // finish() after it stopped), so records still land in the order of their beat numbers.
  void beat_until_stopped() {
    auto next = Clock::now() + interval_;
    std::unique_lock lock(mutex_);
    int reported_signal = record_.preempt_signal;  // the constructor's record already carries the signal of then
    while (!stopping_) {
      wake_.wait_for(lock, kSignalPoll);
      if (stopping_) break;
      int signal_now = preemption_signal();
      if (Clock::now() < next && signal_now == reported_signal && !urgent_) continue;
      reported_signal = signal_now;
      urgent_ = false;
      const std::string text = next_record_locked();
      lock.unlock();
      try {
        write_heartbeat_file(path_, text);
      } catch (const IoError& error) {
        // A full or vanished run directory must not kill training; the launcher will see the silence.
        TENAX_LOG(Warn, "worker") << "heartbeat not written: " << error.what();
      }
      lock.lock();
      next = Clock::now() + interval_;
    }
  }

  void write_now() {
    std::unique_lock lock(mutex_);
    const std::string text = next_record_locked();
    lock.unlock();
    write_heartbeat_file(path_, text);
  }

  // The next record, formatted from the state under mutex_.
  std::string next_record_locked() {
    ++record_.beat;
    record_.seq = operations_issued();
    record_.preempt_signal = preemption_signal();
    return format_heartbeat(record_);
  }

  void stop_writer() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (writer_.joinable()) writer_.join();
  }

  LaunchInfo info_;
  std::chrono::milliseconds interval_{0};
  std::string path_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool urgent_ = false;  // write at the next poll instead of waiting for the interval
  HeartbeatRecord record_;
  Clock::time_point last_mark_;
  double stall_not_deducted_ = 0;  // stall reported (checkpoint_committed), not yet taken off productive_s
  std::thread writer_;
};

Worker::Worker(int rank) {
  install_preemption_handlers();
  impl_ = std::make_unique<Impl>(rank);
}

Worker::~Worker() = default;

const LaunchInfo& Worker::info() const {
  return impl_->info();
}

void Worker::resumed_from(std::int64_t step, double load_seconds, CheckpointTier tier) {
  impl_->resumed_from(step, load_seconds, tier);
}

void Worker::heartbeat(std::int64_t step) {
  impl_->heartbeat(step);
}

void Worker::checkpoint_committed(std::int64_t step, double stall_seconds, double final_seconds) {
  impl_->checkpoint_committed(step, stall_seconds, final_seconds);
}

void Worker::checkpoint_counts(std::int64_t shared, std::int64_t node_local) {
  impl_->checkpoint_counts(shared, node_local);
}

int Worker::finish(int exit_code) {
  return impl_->finish(exit_code);
}

}  // namespace tenax::worker
