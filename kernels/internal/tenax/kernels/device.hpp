// Whether a CUDA device can be used by this process. Exists in every build (a build without CUDA has no device), so
// callers and tests can ask without #if.
#pragma once

namespace tenax::kernels::cuda {

// True when this build has CUDA and the CUDA runtime reports at least one device. Never throws: a machine without a
// driver (cudaErrorInsufficientDriver), with a driver but no GPU (cudaErrorNoDevice), or any other runtime failure
// counts as "no device".
bool device_available() noexcept;

}  // namespace tenax::kernels::cuda
