// The NCCL backend on device buffers. One GPU allows one rank per NCCL communicator, so these run on one rank and
// check every operation's data path, dtype mapping, stream completion and the split; multi-GPU machines run the MPI
// collective tests' matrix against NCCL through the benchmark.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/mpi_test.hpp"
#include "tenax/communicator.hpp"
#include "tenax/error.hpp"

namespace tenax::test {
namespace {

bool have_device() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

class Nccl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_device()) {
      if (gpu_required()) FAIL() << "TENAX_TEST_GPU=1 but no CUDA device is usable";
      GTEST_SKIP() << "no CUDA device";
    }
    comm_ = make_nccl_communicator(world(), 0, "nccl-test");
  }
  template <class T>
  T* device_copy(const std::vector<T>& host) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<std::size_t>(host.size(), 1) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    allocations_.push_back(p);
    return static_cast<T*>(p);
  }
  template <class T>
  std::vector<T> host_copy(const T* device, std::size_t n) {
    std::vector<T> out(n);
    EXPECT_EQ(cudaMemcpy(out.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  void TearDown() override {
    for (void* p : allocations_)
      cudaFree(p);
  }
  std::unique_ptr<Communicator> comm_;
  std::vector<void*> allocations_;
};

TEST_F(Nccl, ReportsItsShape) {
  EXPECT_EQ(comm_->backend(), Backend::Nccl);
  EXPECT_EQ(comm_->size(), world().size());
  EXPECT_EQ(comm_->rank(), world().rank());
  EXPECT_EQ(comm_->name(), "nccl-test");
}

TEST_F(Nccl, AllReduceEveryDtypeOnOneRankIsTheIdentity) {
  std::vector<float> values(1000);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(i % 97) - 48.0f;
  float* in = device_copy(values);
  float* out = device_copy(std::vector<float>(values.size(), 0.0f));
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg}) {
    comm_->all_reduce(in, out, values.size(), DType::F32, op);
    comm_->synchronize();
    EXPECT_EQ(host_copy(out, values.size()), values) << reduce_op_name(op);
  }
  std::vector<std::int64_t> ints(333, 7);
  auto* iin = device_copy(ints);
  comm_->all_reduce(iin, iin, ints.size(), DType::I64, ReduceOp::Sum);
  comm_->synchronize();
  EXPECT_EQ(host_copy(iin, ints.size()), ints);
}

TEST_F(Nccl, GatherScatterBroadcastAndPointToPoint) {
  const std::vector<std::uint16_t> bits(4099, 0x3F80);  // bf16 1.0
  auto* a = device_copy(bits);
  auto* b = device_copy(std::vector<std::uint16_t>(bits.size(), 0));
  comm_->all_gather(a, b, bits.size(), DType::BF16);
  comm_->synchronize();
  EXPECT_EQ(host_copy(b, bits.size()), bits);
  auto* c = device_copy(std::vector<std::uint16_t>(bits.size(), 0));
  comm_->reduce_scatter(a, c, bits.size(), DType::BF16, ReduceOp::Sum);
  comm_->synchronize();
  EXPECT_EQ(host_copy(c, bits.size()), bits);
  comm_->broadcast(a, bits.size(), DType::F16, 0);
  auto* d = device_copy(std::vector<std::uint16_t>(bits.size(), 0));
  comm_->send_recv(a, bits.size(), 0, d, bits.size(), 0, DType::BF16);
  comm_->synchronize();
  EXPECT_EQ(host_copy(d, bits.size()), bits);
  comm_->barrier();
  EXPECT_GE(comm_->sequence(), 5u);
}

TEST_F(Nccl, SplitMakesAWorkingChild) {
  auto child = comm_->split(0, 0, "child");
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->name(), "child");
  std::vector<double> values(17, 2.5);
  double* p = device_copy(values);
  child->all_reduce(p, p, values.size(), DType::F64, ReduceOp::Sum);
  child->synchronize();
  EXPECT_EQ(host_copy(p, values.size()), values);
  EXPECT_EQ(comm_->split(-1, 0, "none"), nullptr);
}

TEST_F(Nccl, PeerOutsideTheGroupIsAUsageError) {
  float* p = device_copy(std::vector<float>(4, 1.0f));
  EXPECT_THROW(comm_->send(p, 4, DType::F32, 5), UsageError);
  EXPECT_FALSE(comm_->aborted());
}

}  // namespace
}  // namespace tenax::test
