#include "checkpoint/io_thread.hpp"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "checkpoint/hdf5_util.hpp"
#include "tenax/log.hpp"

namespace tenax::ckpt {

IoThread::IoThread(int nice, const char* name) : nice_(nice), name_(name), thread_([this] { loop(); }) {}

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
  pthread_setname_np(pthread_self(), name_);
  // Linux niceness is per thread; the thread inherited the creator's. Lowering priority needs no privilege, and a
  // failure only costs priority, never correctness, so it is logged, not raised.
  if (nice_ > 0) {
    const id_t self = static_cast<id_t>(::gettid());
    errno = 0;
    const int inherited = ::getpriority(PRIO_PROCESS, self);
    const int wanted = std::min(19, (errno == 0 ? inherited : 0) + nice_);
    if (::setpriority(PRIO_PROCESS, self, wanted) != 0)
      TENAX_LOG(Warn, "ckpt") << "cannot lower the checkpoint I/O thread's priority to nice " << wanted << ": "
                              << std::strerror(errno);
  }
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
