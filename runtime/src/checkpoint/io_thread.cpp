#include "checkpoint/io_thread.hpp"

#include <pthread.h>

#include "checkpoint/hdf5_util.hpp"

namespace tenax::ckpt {

IoThread::IoThread() : thread_([this] { loop(); }) {}

IoThread::~IoThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_one();
  thread_.join();
}

void IoThread::enqueue(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  ready_.notify_one();
}

void IoThread::loop() {
  pthread_setname_np(pthread_self(), "tenax-ckpt-io");
  h5::silence_errors_on_this_thread();
  while (true) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();  // packaged_task: exceptions land in the job's future
  }
}

}  // namespace tenax::ckpt
