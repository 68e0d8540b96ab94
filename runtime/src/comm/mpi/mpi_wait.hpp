// Waiting for MPI requests with a deadline. MPI's blocking calls cannot be interrupted, so every tenax operation is
// issued non-blocking and completed here, where a deadline can turn a dead or stuck peer into an error.
#pragma once

#include <mpi.h>

#include <chrono>

namespace tenax::detail {

// Drives MPI progress until all n requests complete (true) or `timeout` passes (false; zero = no limit).
// Spins briefly (small messages finish in microseconds), then yields the core between tests: ranks often outnumber
// cores, and the peer we are waiting for needs the core to make progress.
bool wait_requests(MPI_Request* requests, int n, std::chrono::milliseconds timeout);

}  // namespace tenax::detail
