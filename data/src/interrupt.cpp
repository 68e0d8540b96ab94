// tenax-data's Ctrl-C: a flag the commands look at between batches (commands.hpp).
#include <signal.h>

#include <csignal>

#include "commands.hpp"

namespace tenax::datatool {
namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_interrupt(int signo) {
  if (g_signal != 0) {  // asked twice: stop now, as without the handler
    ::signal(signo, SIG_DFL);
    ::raise(signo);
    return;
  }
  g_signal = signo;
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  for (const int signo : {SIGINT, SIGTERM, SIGHUP})
    ::sigaction(signo, &action, nullptr);
}

void throw_if_interrupted() {
  if (const int signo = g_signal; signo != 0) throw Interrupted(signo);
}

}  // namespace tenax::datatool
