#include "tensor/device_wait.hpp"

#include "tenax/build_config.hpp"

#if TENAX_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>

#include "core/failure_watchdog.hpp"
#include "tenax/error.hpp"

namespace tenax::detail {
namespace {

template <class Query>
void bounded_wait(Query query, const std::string& what) {
  FailureWatchdog& watchdog = FailureWatchdog::instance();
  const auto start = std::chrono::steady_clock::now();
  const std::chrono::milliseconds timeout = watchdog.timeout();
  for (unsigned spin = 0;; ++spin) {
    const cudaError_t state = query();
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady)
      throw DeviceError(what + ": CUDA reported " + std::string(cudaGetErrorString(state)));
    if (std::optional<std::string> failure = watchdog.failure())
      throw CommError(what + " gave up: " + *failure + " (every communicator was aborted)");
    const auto waited = std::chrono::steady_clock::now() - start;
    if (timeout.count() > 0 && waited > timeout) {
      const std::string why = what + " did not complete within TENAX_COMM_TIMEOUT (" + std::to_string(timeout.count()) +
                              " ms): device work is stuck, most likely behind a "
                              "collective a dead peer never joined";
      watchdog.abort_all(why);
      throw TimeoutError(why);
    }
    if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(spin > 100000 ? 500 : 20));
  }
}

}  // namespace

void wait_for_stream(void* stream, const std::string& what) {
  bounded_wait([stream] { return cudaStreamQuery(static_cast<cudaStream_t>(stream)); }, what);
}

void wait_for_event(void* event, const std::string& what) {
  bounded_wait([event] { return cudaEventQuery(static_cast<cudaEvent_t>(event)); }, what);
}

}  // namespace tenax::detail

#endif
