// Helpers for the CUDA-vs-CPU tests: a fixture that skips without a device (fails with TENAX_TEST_GPU=1) and a small
// RAII device buffer.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "cuda/check.hpp"
#include "kernel_test_util.hpp"
#include "tenax/kernels/device.hpp"

namespace tenax::kernels::test {

class CudaKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_available()) return;
    if (gpu_required()) FAIL() << "TENAX_TEST_GPU=1 but no usable CUDA device";
    GTEST_SKIP() << "no usable CUDA device (set TENAX_TEST_GPU=1 to make this a failure)";
  }
  void TearDown() override {
    if (cuda::device_available()) TENAX_CUDA_CHECK(cudaDeviceSynchronize());
  }
};

// `count` elements of T on the device, optionally starting `offset` elements into the allocation so that tests can
// hand the kernels pointers that are not 16-byte aligned (the scalar paths).
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t count, std::size_t offset = 0) : count_(count), offset_(offset) {
    TENAX_CUDA_CHECK(cudaMalloc(&base_, (count + offset + 1) * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host, std::size_t offset = 0) : DeviceBuffer(host.size(), offset) {
    upload(host);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(base_); }

  T* get() { return static_cast<T*>(base_) + offset_; }
  void upload(const std::vector<T>& host) {
    TENAX_CUDA_CHECK(cudaMemcpy(get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() {
    std::vector<T> host(count_);
    TENAX_CUDA_CHECK(cudaMemcpy(host.data(), get(), count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  void* base_ = nullptr;
  std::size_t count_;
  std::size_t offset_;
};

}  // namespace tenax::kernels::test
