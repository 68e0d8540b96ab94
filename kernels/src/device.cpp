#include "tenax/kernels/device.hpp"

#include "tenax/kernels/config.hpp"

#if TENAX_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tenax::kernels::cuda {

bool device_available() noexcept {
#if TENAX_HAVE_CUDA
  int count = 0;
  // Without a driver this returns cudaErrorInsufficientDriver and leaves count unwritten; with a driver but no GPU,
  // cudaErrorNoDevice. Every error means "no usable device". The error is sticky for this query only, so clear it to
  // keep it from surfacing in an unrelated later check.
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return count > 0;
#else
  return false;
#endif
}

}  // namespace tenax::kernels::cuda
