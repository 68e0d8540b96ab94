// TENAX_CHECK_CUDA: CUDA runtime calls. Only for translation units built when TENAX_HAVE_CUDA.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "core/checks.hpp"

#define TENAX_CHECK_CUDA(call)                                                              \
  do {                                                                                      \
    const cudaError_t tenax_rc_ = (call);                                                   \
    if (tenax_rc_ != cudaSuccess)                                                           \
      ::tenax::detail::throw_call_error<::tenax::DeviceError>(                              \
          "CUDA", #call, __FILE__, __LINE__,                                                \
          std::string(cudaGetErrorName(tenax_rc_)) + ": " + cudaGetErrorString(tenax_rc_)); \
  } while (0)
