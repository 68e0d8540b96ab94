// SIGTERM / SIGUSR1 only set a flag: the training loop polls it between steps, finishes the step, checkpoints and
// exits with kExitPreempted. Doing anything more inside the handler (I/O, locks, MPI) is not async-signal-safe.
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <string>

#include "tenax/error.hpp"
#include "tenax/worker.hpp"

namespace tenax::worker {
namespace {

std::atomic<int> g_preemption_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the preemption flag must be usable from a signal handler");

extern "C" void record_preemption_signal(int signo) {
  int expected = 0;
  // The first signal wins: a later SIGTERM after SIGUSR1 is the same request, sent harder.
  g_preemption_signal.compare_exchange_strong(expected, signo, std::memory_order_relaxed);
}

void install_one(int signo) {
  struct sigaction action {};
  action.sa_handler = record_preemption_signal;
  sigemptyset(&action.sa_mask);
  // SA_RESTART: a signal must not make a blocking read/write/MPI progress call fail with EINTR.
  action.sa_flags = SA_RESTART;
  if (sigaction(signo, &action, nullptr) != 0) {
    throw Error(std::string("sigaction(") + strsignal(signo) + ") failed: " + std::strerror(errno));
  }
}

}  // namespace

void install_preemption_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    install_one(SIGTERM);
    install_one(SIGUSR1);
  });
}

bool preemption_requested() noexcept {
  return g_preemption_signal.load(std::memory_order_relaxed) != 0;
}

int preemption_signal() noexcept {
  return g_preemption_signal.load(std::memory_order_relaxed);
}

}  // namespace tenax::worker
