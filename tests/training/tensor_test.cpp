#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

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

// Extents whose product does not fit in 64 bits must be refused: wrapped around, {2^32, 2^32} once gave 0 elements,
// a 0-byte allocation, and writes far past it.
TEST(Tensor, ShapesWhoseSizeOverflowsAreRefusedNamingTheShape) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  for (const Shape& shape : {Shape{std::int64_t{1} << 32, std::int64_t{1} << 32}, Shape{kMax, 2}, Shape{3, kMax / 2},
                             Shape{1 << 20, 1 << 20, 1 << 20, 1 << 20}}) {
    try {
      shape_numel(shape);
      ADD_FAILURE() << shape_to_string(shape) << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(shape_to_string(shape)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("overflow"), std::string::npos) << e.what();
    }
    EXPECT_THROW(Tensor::empty(shape, DType::F32), UsageError) << shape_to_string(shape);
  }
  EXPECT_EQ(shape_numel({kMax}), kMax);
  EXPECT_EQ(shape_numel({kMax, 1, 1}), kMax);
  // A zero extent makes the product 0 wherever it stands, even after extents whose partial product would overflow.
  EXPECT_EQ(shape_numel({kMax, kMax, 0}), 0);
  EXPECT_EQ(shape_numel({0, kMax, kMax}), 0);
  EXPECT_THROW(shape_numel({0, -1}), UsageError);
}

TEST(Tensor, ElementCountsWhoseByteSizeOverflowsAreRefused) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  // kMax elements fit in int64, but kMax * 4 bytes do not: nbytes() would wrap.
  EXPECT_THROW(shape_nbytes({kMax}, DType::F32), UsageError);
  EXPECT_THROW(Tensor::empty({kMax}, DType::F32), UsageError);
  float one = 0;
  EXPECT_THROW(Tensor::view(&one, {kMax / 2, 2}, DType::F32), UsageError);
  EXPECT_EQ(shape_nbytes({kMax}, DType::U8), static_cast<std::size_t>(kMax));
  EXPECT_EQ(shape_nbytes({3, 5}, DType::F64), 120u);
}

#if !TENAX_HAVE_CUDA
TEST(Tensor, DeviceMemoryNeedsACudaBuild) {
  EXPECT_THROW(Tensor::empty({2}, DType::F32, Device::Cuda), UsageError);
}
#endif

}  // namespace
}  // namespace tenax
