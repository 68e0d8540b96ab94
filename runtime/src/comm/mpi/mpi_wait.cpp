#include "comm/mpi/mpi_wait.hpp"

#include <sched.h>

#include "core/check_mpi.hpp"

namespace tenax::detail {

bool wait_requests(MPI_Request* requests, int n, std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  const bool bounded = timeout.count() > 0;
  const clock::time_point deadline = bounded ? clock::now() + timeout : clock::time_point::max();
  // Spin first (small messages complete in microseconds), then yield the core between tests: ranks often outnumber
  // cores, and the peer being waited for needs one. No sleeping: non-blocking collectives advance only inside MPI
  // calls, so every pause between tests would delay each round of the algorithm.
  constexpr unsigned kTightSpins = 256;
  for (unsigned spin = 0;; ++spin) {
    int done = 0;
    TENAX_CHECK_MPI(MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE));
    if (done) return true;
    if (spin < kTightSpins) continue;
    if (bounded && (spin % 64) == 0 && clock::now() > deadline) return false;
    sched_yield();
  }
}

}  // namespace tenax::detail
