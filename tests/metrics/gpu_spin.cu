// A kernel that keeps the device busy for a given time (reading the global nanosecond timer), so the GPU tests can
// enqueue device work of known length that the host does not wait for.
#include <cuda_runtime.h>

#include "gpu_spin.hpp"

namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin(unsigned long long ns) {
  const unsigned long long start = global_ns();
  while (global_ns() - start < ns) {
  }
}

}  // namespace

namespace tenax::test {

int enqueue_spin(void* stream, double seconds) {
  spin<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<unsigned long long>(seconds * 1e9));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace tenax::test
