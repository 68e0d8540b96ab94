// The checkpointer's background thread. It runs jobs one at a time in submission order and is the only thread that
// makes HDF5 calls for the checkpointer, so the library's global lock is never contended by the training thread and a
// commit can never overtake the write it commits. It never calls the communicator.
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
  // wins contended cores.
  explicit IoThread(int nice);
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
  std::thread thread_;  // last: it starts in the constructor and reads the members above
};

}  // namespace tenax::ckpt
