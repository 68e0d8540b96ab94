// Pure parts of data parallelism and state description: bucket layout, ZeRO-1 ownership, flat ranges as boxes.
#include <gtest/gtest.h>

#include <numeric>

#include "tenax/data_parallel.hpp"
#include "tenax/model_state.hpp"

namespace tenax {
namespace {

ParameterSpec spec(const std::string& name, Shape shape) {
  return {name, shape, Shape(shape.size(), 0), shape};
}

TEST(FlatLayout, BucketsCloseOnceFullAndNeverSplitAParameter) {
  // 100 + 60 + 10 + 200 + 5 floats, buckets of 128 floats (512 bytes).
  std::vector<ParameterSpec> specs = {spec("a", {10, 10}), spec("b", {60}), spec("c", {10}), spec("d", {20, 10}),
                                      spec("e", {5})};
  const FlatLayout l = FlatLayout::build(specs, 512, 1, false);
  ASSERT_EQ(l.buckets.size(), 3u);
  EXPECT_EQ(l.buckets[0].first_param, 0u);
  EXPECT_EQ(l.buckets[0].end_param, 2u);  // a + b = 160 >= 128
  EXPECT_EQ(l.buckets[0].count, 160u);
  EXPECT_EQ(l.buckets[1].end_param, 4u);  // c + d = 210
  EXPECT_EQ(l.buckets[2].count, 5u);
  EXPECT_EQ(l.total, 375u);
  EXPECT_EQ(l.param_offset[3], 170u);
  EXPECT_EQ(l.param_bucket[4], 2u);
}

TEST(FlatLayout, ZeroOnePadsBucketsAndPartitionsThemOverRanks) {
  std::vector<ParameterSpec> specs = {spec("a", {7}), spec("b", {3, 3}), spec("c", {1})};
  const int dp = 4;
  const FlatLayout l = FlatLayout::build(specs, 1 << 20, dp, true);
  ASSERT_EQ(l.buckets.size(), 1u);
  EXPECT_EQ(l.buckets[0].count, 20u);  // 17 elements padded to a multiple of 4
  std::size_t next = 0;
  for (int r = 0; r < dp; ++r) {
    const FlatRange o = l.owned(0, r, dp, true);
    EXPECT_EQ(o.begin, next);
    EXPECT_EQ(o.count, 5u);
    next += o.count;
  }
  const FlatRange whole = l.owned(0, 2, dp, false);
  EXPECT_EQ(whole.count, 20u);
}

TEST(BoxesOfFlatRange, SplitsARangeIntoPartialRowWholeRowsAndPartialRow) {
  const auto boxes = boxes_of_flat_range({4, 5}, 3, 13);  // elements 3..15 of a 4x5 matrix
  ASSERT_EQ(boxes.size(), 3u);
  EXPECT_EQ(boxes[0].offset, (Shape{0, 3}));
  EXPECT_EQ(boxes[0].shape, (Shape{1, 2}));
  EXPECT_EQ(boxes[1].offset, (Shape{1, 0}));
  EXPECT_EQ(boxes[1].shape, (Shape{2, 5}));
  EXPECT_EQ(boxes[1].flat_begin, 5);
  EXPECT_EQ(boxes[2].offset, (Shape{3, 0}));
  EXPECT_EQ(boxes[2].shape, (Shape{1, 1}));
  EXPECT_EQ(boxes[2].flat_begin, 15);
}

TEST(BoxesOfFlatRange, CoversEveryElementOfAThreeDimensionalTensorOnce) {
  const Shape shape = {3, 4, 5};
  for (std::int64_t begin = 0; begin < 60; begin += 7) {
    for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{6}, std::int64_t{19}, 60 - begin}) {
      if (begin + count > 60) continue;
      std::vector<int> seen(60, 0);
      for (const LocalBox& b : boxes_of_flat_range(shape, begin, count)) {
        std::int64_t flat = b.flat_begin;
        for (std::int64_t i = 0; i < b.shape[0]; ++i)
          for (std::int64_t j = 0; j < b.shape[1]; ++j)
            for (std::int64_t k = 0; k < b.shape[2]; ++k) {
              const std::int64_t at = ((b.offset[0] + i) * 4 + b.offset[1] + j) * 5 + b.offset[2] + k;
              EXPECT_EQ(at, flat++) << "a box's elements are contiguous from flat_begin";
              ++seen[static_cast<std::size_t>(at)];
            }
      }
      for (std::int64_t e = 0; e < 60; ++e)
        EXPECT_EQ(seen[static_cast<std::size_t>(e)], e >= begin && e < begin + count ? 1 : 0) << e;
    }
  }
}

}  // namespace
}  // namespace tenax
