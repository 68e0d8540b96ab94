// A checkpointer's background thread. It runs jobs one at a time in submission order, so a commit can never overtake
// the write it commits. A checkpointer has one for the shared directory and, with the node-local tier, one for that
// tier, so that a node-local copy never waits behind a slow shared write; only these threads make HDF5 calls for the
// checkpointer (the library's global lock is never contended by the training thread). It never calls the
// communicator.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

namespace tenax::ckpt {

class IoThread {
 public:
  // nice: niceness the thread adds to the one it inherits (0: unchanged; capped at 19), so that the training thread
  // wins contended cores. name: the thread's name as tools show it (at most 15 characters).
  IoThread(int nice, const char* name);
  // Runs every job already submitted, then stops.
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  template <class F>
  auto submit(F job) -> std::future<decltype(job())> {
    using R = decltype(job());
    auto task = std::make_shared<std::packaged_task<R()>>(std::move(job));
    std::future<R> result = task->get_future();
    enqueue([task] { (*task)(); });
    return result;
  }

 private:
  void enqueue(std::function<void()> job);
  void loop();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  int nice_;
  const char* name_;
  std::thread thread_;  // last: it starts in the constructor and reads the members above
};

}  // namespace tenax::ckpt
