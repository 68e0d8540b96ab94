// One check macro per foreign API (CUDA runtime, cuBLAS): a failed call throws tenax::DeviceError naming the call,
// file:line, and the library's error name and text. Internal to the kernels library and its tests.
#pragma once

#include <cuda_runtime_api.h>

namespace tenax::kernels::detail {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(int status, const char* call, const char* file, int line);

}  // namespace tenax::kernels::detail

#define TENAX_CUDA_CHECK(call)                                                                   \
  do {                                                                                           \
    const cudaError_t tenax_cuda_status_ = (call);                                               \
    if (tenax_cuda_status_ != cudaSuccess)                                                       \
      ::tenax::kernels::detail::throw_cuda_error(tenax_cuda_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define TENAX_CUBLAS_CHECK(call)                                                                     \
  do {                                                                                               \
    const int tenax_cublas_status_ = static_cast<int>(call);                                         \
    if (tenax_cublas_status_ != 0)                                                                   \
      ::tenax::kernels::detail::throw_cublas_error(tenax_cublas_status_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: a bad launch configuration (grid, shared memory) or an earlier asynchronous fault shows up
// here. cudaGetLastError also clears a non-sticky launch error, so it is not reported again by an unrelated call.
#define TENAX_CUDA_CHECK_LAUNCH(kernel_name)                                                                         \
  do {                                                                                                               \
    const cudaError_t tenax_cuda_status_ = cudaGetLastError();                                                       \
    if (tenax_cuda_status_ != cudaSuccess)                                                                           \
      ::tenax::kernels::detail::throw_cuda_error(tenax_cuda_status_, "launch of " #kernel_name, __FILE__, __LINE__); \
  } while (0)
