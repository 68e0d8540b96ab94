#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tenax/error.hpp"
#include "tenax/parallel_layout.hpp"

namespace tenax {
namespace {

std::string usage_error_of(auto&& call) {
  try {
    call();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no UsageError>";
}

TEST(Layout, CoordinatesAreABijectionWithTpFastestThenDpThenPp) {
  for (const ParallelLayout layout : {ParallelLayout{1, 1, 1}, ParallelLayout{2, 1, 2}, ParallelLayout{2, 2, 1},
                                      ParallelLayout{1, 2, 2}, ParallelLayout{4, 2, 3}, ParallelLayout{3, 5, 2}}) {
    std::set<int> seen;
    for (int rank = 0; rank < layout.world_size(); ++rank) {
      const RankCoords c = coords_of(layout, rank);
      EXPECT_GE(c.tp, 0);
      EXPECT_LT(c.tp, layout.tp);
      EXPECT_LT(c.pp, layout.pp);
      EXPECT_LT(c.dp, layout.dp);
      EXPECT_EQ(rank_of(layout, c), rank);
      EXPECT_EQ(rank, c.tp + layout.tp * (c.dp + layout.dp * c.pp));
      seen.insert(rank_of(layout, c));
    }
    EXPECT_EQ(static_cast<int>(seen.size()), layout.world_size());
  }
}

TEST(Layout, TensorParallelGroupsAreConsecutiveRanks) {
  const ParallelLayout layout{4, 2, 2};
  for (int rank = 0; rank < layout.world_size(); ++rank) {
    const RankCoords c = coords_of(layout, rank);
    EXPECT_EQ(rank - c.tp, rank_of(layout, RankCoords{0, c.pp, c.dp}));
  }
}

TEST(Layout, ValidateNamesTheSizesAndTheFix) {
  EXPECT_NO_THROW((ParallelLayout{2, 1, 2}.validate(4)));
  const std::string message = usage_error_of([] { ParallelLayout{2, 2, 2}.validate(4); });
  EXPECT_NE(message.find("tp=2,pp=2,dp=2"), std::string::npos) << message;
  EXPECT_NE(message.find("8 ranks"), std::string::npos) << message;
  EXPECT_NE(message.find("has 4"), std::string::npos) << message;
  EXPECT_THROW((ParallelLayout{0, 1, 4}.validate(4)), UsageError);
}

TEST(Layout, ParsesBothSpellings) {
  EXPECT_EQ(ParallelLayout::parse("tp=2,pp=1,dp=2"), (ParallelLayout{2, 1, 2}));
  EXPECT_EQ(ParallelLayout::parse("dp=4"), (ParallelLayout{1, 1, 4}));
  EXPECT_EQ(ParallelLayout::parse("pp=2,tp=4"), (ParallelLayout{4, 2, 1}));
  EXPECT_EQ(ParallelLayout::parse("2x1x2"), (ParallelLayout{2, 1, 2}));
  EXPECT_EQ(ParallelLayout::parse("8x4x16"), (ParallelLayout{8, 4, 16}));
  EXPECT_EQ((ParallelLayout{2, 4, 8}).to_string(), "tp=2,pp=4,dp=8");
  EXPECT_EQ(ParallelLayout::parse((ParallelLayout{3, 2, 5}).to_string()), (ParallelLayout{3, 2, 5}));
}

TEST(Layout, RejectsMalformedText) {
  for (const char* bad :
       {"", "tp=0", "tp=-1", "tp=2,tp=2", "xp=2", "tp2", "2x2", "2x2x2x2", "axbxc", "tp=2,,dp=1", "tp=1.5"}) {
    EXPECT_THROW(ParallelLayout::parse(bad), UsageError) << bad;
  }
  EXPECT_NE(usage_error_of([] { ParallelLayout::parse("xp=2"); }).find("unknown key 'xp'"), std::string::npos);
}

// Degrees whose product does not fit an int once parsed fine and then wrapped in world_size() (65536^2 * 2 = 2^33).
TEST(Layout, DegreesWhoseProductOverflowsAreRefused) {
  for (const char* bad : {"tp=65536,pp=65536,dp=2", "2147483647x2x1", "65536x65536x1", "dp=2147483647,tp=2",
                          "2147483647x2147483647x2147483647"}) {
    const std::string message = usage_error_of([&] { ParallelLayout::parse(bad); });
    EXPECT_NE(message.find("tp*pp*dp"), std::string::npos) << bad << ": " << message;
    EXPECT_NE(message.find("2147483647"), std::string::npos) << bad << ": " << message;
  }
  EXPECT_EQ(ParallelLayout::parse("dp=2147483647"), (ParallelLayout{1, 1, 2147483647}));
  EXPECT_EQ(ParallelLayout::parse("1073741823x2x1"), (ParallelLayout{1073741823, 2, 1}));
  // validate() and infer() multiply in 64 bits: a product that wraps is a mismatch, not a division by zero.
  EXPECT_NE(usage_error_of([] {
              (ParallelLayout{65536, 65536, 1}).validate(0);
            }).find("4294967296"),
            std::string::npos);
  EXPECT_NE(usage_error_of([] { ParallelLayout::infer(8, 65536, 65536); }).find("tp*pp = 4294967296"),
            std::string::npos);
}

TEST(Layout, InferDerivesDataParallelDegree) {
  EXPECT_EQ(ParallelLayout::infer(8, 2, 2), (ParallelLayout{2, 2, 2}));
  EXPECT_EQ(ParallelLayout::infer(4, 1, 1), (ParallelLayout{1, 1, 4}));
  const std::string message = usage_error_of([] { ParallelLayout::infer(6, 4, 1); });
  EXPECT_NE(message.find("does not divide"), std::string::npos) << message;
}

}  // namespace
}  // namespace tenax
