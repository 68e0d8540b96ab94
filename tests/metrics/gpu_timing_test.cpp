// Device timing with CUDA events, and the loader's pinned and device buffers. Skipped without a GPU; failing instead
// when TENAX_TEST_GPU=1.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "common/mpi_test.hpp"
#include "gpu_spin.hpp"
#include "tenax/data_loader.hpp"
#include "tenax/metrics.hpp"

namespace tenax::metrics {
namespace {

using test::world;

#define REQUIRE_GPU()                                                                   \
  do {                                                                                  \
    int devices = 0;                                                                    \
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {                  \
      cudaGetLastError();                                                               \
      if (test::gpu_required()) FAIL() << "TENAX_TEST_GPU=1 but no usable CUDA device"; \
      GTEST_SKIP() << "no usable CUDA device";                                          \
    }                                                                                   \
  } while (0)

double phase_seconds(const Summary& s, Phase p) {
  return s.phase_fraction[static_cast<std::size_t>(p)] * s.mean_step_seconds;
}

class GpuTiming : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_GPU();
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Runs steps of: compute (enqueue `device_ms` of device work, host returns at once), then a host-side data wait of
  // `host_wait_ms`. Measured by a device-timed and a host-timed StepMetrics at the same time.
  std::pair<Summary, Summary> run(double device_ms, int host_wait_ms, int steps) {
    Options device_options;
    device_options.every = 4;
    device_options.cuda_stream = stream_;
    Options host_options;
    host_options.every = 4;
    StepMetrics on_device(world(), device_options);
    StepMetrics on_host(world(), host_options);
    EXPECT_TRUE(on_device.device_timing());
    for (int step = 0; step < steps; ++step) {
      on_device.begin_step(step);
      on_host.begin_step(step);
      {
        auto a = on_device.measure(Phase::Compute);
        auto b = on_host.measure(Phase::Compute);
        EXPECT_EQ(test::enqueue_spin(stream_, device_ms / 1e3), 0);
      }
      {
        auto a = on_device.measure(Phase::DataWait);
        auto b = on_host.measure(Phase::DataWait);
        std::this_thread::sleep_for(std::chrono::milliseconds(host_wait_ms));
      }
      on_device.end_step();
      on_host.end_step();
    }
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    Summary d = on_device.finish();
    Summary h = on_host.finish();
    return {d, h};
  }

  cudaStream_t stream_ = nullptr;
};

// The device is busy for 40 ms while the host waits 10 ms for data: host timers call that starvation and see no
// compute; the device knows it was never idle.
TEST_F(GpuTiming, AsynchronousWorkIsChargedToThePhaseThatEnqueuedIt) {
  const auto [device, host] = run(40, 10, 8);
  EXPECT_GT(phase_seconds(device, Phase::Compute), 0.035) << device.table;
  EXPECT_LT(phase_seconds(device, Phase::DataWait), 0.003) << device.table;
  EXPECT_GT(device.step_efficiency, 0.85) << device.table;
  EXPECT_GT(phase_seconds(host, Phase::DataWait), 0.009) << host.table;
  EXPECT_LT(phase_seconds(host, Phase::Compute), 0.005) << host.table;
}

// The device finishes 2 ms of work and then sits idle while the host waits 30 ms for data: that idle time is the
// starvation.
TEST_F(GpuTiming, StarvationIsDeviceIdleTimeWaitingForTheBatch) {
  const auto [device, host] = run(2, 30, 8);
  EXPECT_GT(phase_seconds(device, Phase::DataWait), 0.025) << device.table;
  EXPECT_GT(device.starvation, 0.8) << device.table;
  EXPECT_NEAR(phase_seconds(device, Phase::Compute), 0.002, 0.0015) << device.table;
  ASSERT_FALSE(device.advice.empty());
  EXPECT_EQ(device.advice[0].rfind("data-bound", 0), 0u) << device.table;
}

TEST(GpuDataLoader, DeviceCopiesMatchTheProducedBatchesInStreamOrder) {
  REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  constexpr std::size_t kBytes = 1 << 20;
  {
    DataLoader loader(
        {.batch_bytes = kBytes, .workers = 3, .prefetch = 2, .pinned = true, .device = 0, .stream = stream},
        [](std::int64_t index, std::span<std::byte> out) {
          std::memset(out.data(), static_cast<int>((index * 37) & 0xff), out.size());
        });
    std::vector<unsigned char> back(kBytes);
    for (int i = 0; i < 12; ++i) {
      const Batch b = loader.next();
      ASSERT_NE(b.device, nullptr);
      cudaPointerAttributes attributes{};
      ASSERT_EQ(cudaPointerGetAttributes(&attributes, b.host.data()), cudaSuccess);
      EXPECT_EQ(attributes.type, cudaMemoryTypeHost);  // page-locked
      // Slow the consumer's stream down so that workers would overwrite a slot still in use if reuse were unordered.
      ASSERT_EQ(test::enqueue_spin(stream, 0.002), 0);
      ASSERT_EQ(cudaMemcpyAsync(back.data(), b.device, kBytes, cudaMemcpyDeviceToHost, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      const auto expected = static_cast<unsigned char>((i * 37) & 0xff);
      EXPECT_EQ(back.front(), expected);
      EXPECT_EQ(back.back(), expected);
    }
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace tenax::metrics
