// Internal: the one bounded host wait for device work. Every place where the host waits for a CUDA stream or event
// (ExecutionContext::synchronize, download, the upload ring, buffer growth, destructors) goes through it, so a peer
// that dies while device work waits on its communicator can never hang the host: the wait polls the work and the
// failure watchdog (core/failure_watchdog.hpp), and gives up with CommError when the watchdog saw a communicator fail
// (every communicator is then aborted, which releases the device work stuck on them), or with TimeoutError after
// TENAX_COMM_TIMEOUT (0: no limit), aborting every communicator first.
#pragma once

#include <string>

namespace tenax::detail {

// `stream` is a cudaStream_t, `event` a cudaEvent_t (void* keeps CUDA out of this header). `what` names the wait in
// errors ("download of 4096 bytes on cuda:0").
void wait_for_stream(void* stream, const std::string& what);
void wait_for_event(void* event, const std::string& what);

}  // namespace tenax::detail
