// Test helper (CUDA builds): device work of a known duration.
#pragma once

namespace tenax::test {

// Enqueues a single-thread kernel that spins for `seconds` on `stream` (a cudaStream_t); returns the cudaError_t.
int enqueue_spin(void* stream, double seconds);

}  // namespace tenax::test
