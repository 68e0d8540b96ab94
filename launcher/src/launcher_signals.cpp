#include "launcher_signals.hpp"

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

std::atomic<int> g_signal{0};

extern "C" void record_signal(int signo) {
  int expected = 0;
  g_signal.compare_exchange_strong(expected, signo, std::memory_order_relaxed);
}

}  // namespace

void install_launcher_signal_handlers() {
  for (int signo : {SIGTERM, SIGUSR1, SIGINT}) {
    struct sigaction action {};
    action.sa_handler = record_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: the loop's poll() returns at once with EINTR
    if (sigaction(signo, &action, nullptr) != 0) {
      throw Error(std::string("sigaction failed: ") + std::strerror(errno));
    }
  }
  // A closed terminal or log pipe must not kill the supervisor of a long run.
  signal(SIGPIPE, SIG_IGN);
}

int received_signal() noexcept {
  return g_signal.load(std::memory_order_relaxed);
}

}  // namespace tenax::launch
