// The device choice on real MPI ranks: asking for a GPU where there is none is a UsageError on EVERY rank (none may be
// left waiting in NCCL's initialisation), parsing names the choices, and state that lives in device memory cannot be
// checksummed as if it were host memory.
#include <gtest/gtest.h>

#include "engine_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/model_state.hpp"

namespace tenax::test {
namespace {

TEST(DeviceOption, ParsesCpuAndCudaAndNamesTheChoicesOtherwise) {
  EXPECT_EQ(parse_device("cpu"), Device::Host);
  EXPECT_EQ(parse_device("cuda"), Device::Cuda);
  try {
    (void)parse_device("tpu");
    ADD_FAILURE() << "no exception";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("use cpu or cuda"), std::string::npos) << e.what();
  }
}

TEST(DeviceOption, CudaWithoutAGpuIsAUsageErrorOnEveryRank) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU: tests/gpu covers device training";
  if (gpu_required()) FAIL() << "TENAX_TEST_GPU=1 but no usable CUDA device";
  EngineConfig config = small_config({2, 1, 2});
  config.device = Device::Cuda;
  try {
    Engine engine(world(), config, test_model(), test_data());
    ADD_FAILURE() << "no exception on rank " << world().rank();
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("device cuda"), std::string::npos) << what;
    EXPECT_NE(what.find("--device cpu"), std::string::npos) << what;
  }
  // Every rank got here: nobody is stuck in a collective the others left.
  world().barrier();
}

TEST(DeviceOption, DeviceEntriesAreNotChecksummedAsHostMemory) {
  float value = 1.0f;
  StateEntry e;
  e.name = "param/w";
  e.global_shape = e.shape = {1};
  e.offset = {0};
  e.data = &value;
  e.device = Device::Cuda;
  // Every rank throws before the collective, so none waits for the others.
  EXPECT_THROW((void)global_checksum({e}, world()), UsageError);
  e.device = Device::Host;
  EXPECT_NE(global_checksum({e}, world()), 0u);
}

}  // namespace
}  // namespace tenax::test
