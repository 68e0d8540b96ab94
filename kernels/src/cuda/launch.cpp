#include "cuda/launch.hpp"

#include <cublas_v2.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/check.hpp"
#include "cuda/cublas_library.hpp"
#include "tenax/error.hpp"

namespace tenax::kernels::detail {

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  throw DeviceError(std::string("CUDA `") + call + "` failed at " + file + ":" + std::to_string(line) + ": " +
                    cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

void throw_cublas_error(int status, const char* call, const char* file, int line) {
  const auto s = static_cast<cublasStatus_t>(status);
  throw DeviceError(std::string("cuBLAS `") + call + "` failed at " + file + ":" + std::to_string(line) + ": " +
                    cublas().status_name(s) + " (" + cublas().status_string(s) + ")");
}

int resident_blocks(int threads) {
  // The SM count per device, cached per thread (no lock): cudaDeviceGetAttribute is cheap but not free per launch.
  thread_local std::vector<int> sm_count_by_device;
  int device = 0;
  TENAX_CUDA_CHECK(cudaGetDevice(&device));
  if (sm_count_by_device.size() <= static_cast<std::size_t>(device)) sm_count_by_device.resize(device + 1, 0);
  int& sms = sm_count_by_device[device];
  if (sms == 0) TENAX_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // 2048 resident threads per SM on every architecture tenax targets (sm_80, sm_90).
  return sms * std::max(1, 2048 / threads);
}

int grid_blocks(std::size_t items, int threads) {
  const std::size_t needed = (items + threads - 1) / threads;
  return static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(needed, resident_blocks(threads))));
}

}  // namespace tenax::kernels::detail
