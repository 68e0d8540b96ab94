#include "comm/mpi/mpi_wait.hpp"

#include <sched.h>
#include <time.h>

#include "core/check_mpi.hpp"

namespace tenax::detail {

bool wait_requests(MPI_Request* requests, int n, std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  const bool bounded = timeout.count() > 0;
  const clock::time_point start = clock::now();
  const clock::time_point deadline = bounded ? start + timeout : clock::time_point::max();
  // Three phases: spin (small messages complete in microseconds), then yield the core between tests (ranks often
  // outnumber cores, and the peer being waited for needs one), and after a millisecond also sleep briefly, so that a
  // rank waiting for a slow peer stops competing with it for the CPU. Each test also drives MPI's progress engine.
  constexpr unsigned kTightSpins = 256;
  constexpr auto kYieldPhase = std::chrono::milliseconds(1);
  const timespec nap{0, 20'000};
  bool napping = false;
  for (unsigned spin = 0;; ++spin) {
    int done = 0;
    TENAX_CHECK_MPI(MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE));
    if (done) return true;
    if (spin < kTightSpins) continue;
    if ((spin % 64) == 0) {
      const clock::time_point now = clock::now();
      if (bounded && now > deadline) return false;
      napping = now - start > kYieldPhase;
    }
    if (napping) nanosleep(&nap, nullptr);
    else sched_yield();
  }
}

}  // namespace tenax::detail
