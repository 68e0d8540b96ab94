// Host-side launch helpers shared by the CUDA kernel files.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tenax::kernels::detail {

inline cudaStream_t to_stream(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

// Blocks for a grid-stride loop over `items` work items with `threads` threads per block: enough blocks to fill every
// SM of the current device (more only add scheduling cost), fewer when the work is small. Always >= 1.
int grid_blocks(std::size_t items, int threads);

// Blocks that fill the current device once (SM count x resident blocks per SM for `threads`-thread blocks).
int resident_blocks(int threads);

inline bool aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

}  // namespace tenax::kernels::detail
