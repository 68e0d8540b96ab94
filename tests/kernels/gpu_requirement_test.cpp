// In every build, CPU-only included: a job that sets TENAX_TEST_GPU=1 must really have a usable GPU, so the CUDA tests
// cannot pass by skipping.
#include <gtest/gtest.h>

#include "kernel_test_util.hpp"
#include "tenax/build_config.hpp"
#include "tenax/kernels/device.hpp"

namespace tenax::kernels {
namespace {

TEST(GpuRequirementTest, RequiredDeviceIsUsable) {
  const bool available = cuda::device_available();
  if (!test::gpu_required()) {
    if (!available) GTEST_SKIP() << "no usable CUDA device (set TENAX_TEST_GPU=1 to make this a failure)";
    return;
  }
  ASSERT_TRUE(TENAX_HAVE_CUDA) << "TENAX_TEST_GPU=1 but this build has no CUDA (configure with TENAX_WITH_CUDA=ON)";
  ASSERT_TRUE(available) << "TENAX_TEST_GPU=1 but the CUDA runtime reports no usable device";
}

}  // namespace
}  // namespace tenax::kernels
