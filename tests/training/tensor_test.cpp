#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>

#include "tenax/build_config.hpp"
#include "tenax/error.hpp"
#include "tenax/tensor.hpp"

namespace tenax {
namespace {

TEST(Tensor, AllocatesZeroedAlignedHostMemory) {
  Tensor t = Tensor::empty({3, 5}, DType::F32);
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.nbytes(), 60u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data()) % 64, 0u);
  for (int i = 0; i < 15; ++i)
    EXPECT_EQ(t.f32()[i], 0.0f);
  EXPECT_EQ(t.describe(), "f32[3, 5] on host");
}

TEST(Tensor, CopiesAliasAndCloneCopies) {
  Tensor a = Tensor::zeros({4}, DType::F32);
  Tensor alias = a;
  Tensor copy = a.clone();
  a.f32()[2] = 7.0f;
  EXPECT_EQ(alias.f32()[2], 7.0f);
  EXPECT_EQ(copy.f32()[2], 0.0f);
}

TEST(Tensor, ViewsWrapForeignMemory) {
  std::uint16_t raw[6] = {1, 2, 3, 4, 5, 6};
  Tensor v = Tensor::view(raw, {2, 3}, DType::BF16);
  EXPECT_EQ(v.as<std::uint16_t>()[4], 5);
  EXPECT_EQ(v.nbytes(), 12u);
  EXPECT_THROW(v.f32(), std::logic_error);
}

TEST(Tensor, RejectsNegativeExtents) {
  EXPECT_THROW(Tensor::empty({2, -1}, DType::F32), UsageError);
}

#if !TENAX_HAVE_CUDA
TEST(Tensor, DeviceMemoryNeedsACudaBuild) {
  EXPECT_THROW(Tensor::empty({2}, DType::F32, Device::Cuda), UsageError);
}
#endif

}  // namespace
}  // namespace tenax
