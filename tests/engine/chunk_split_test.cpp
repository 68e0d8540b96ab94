// ChunkContext::blocks: how a model's blocks are spread over pipeline chunks. Evenly by default (earlier chunks take
// the extra ones); with the last chunk's own work (an output head) counted in blocks, the split whose slowest chunk is
// fastest, which a brute force over every split confirms.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "tenax/engine.hpp"
#include "tenax/error.hpp"

namespace tenax {
namespace {

std::vector<std::size_t> counts(std::size_t total, int chunks, double extra) {
  std::vector<std::size_t> out;
  std::size_t expected_first = 0;
  for (int v = 0; v < chunks; ++v) {
    ChunkContext c;
    c.virtual_stage = v;
    c.virtual_stages = chunks;
    const auto [first, end] = c.blocks(total, extra);
    EXPECT_EQ(first, expected_first) << "chunks hold consecutive blocks (chunk " << v << ")";
    EXPECT_GE(end, first + 1) << "every chunk holds a block (chunk " << v << ")";
    out.push_back(end - first);
    expected_first = end;
  }
  EXPECT_EQ(expected_first, total) << "every block is held";
  return out;
}

double slowest(const std::vector<std::size_t>& c, double extra) {
  double worst = 0;
  for (std::size_t i = 0; i < c.size(); ++i)
    worst = std::max(worst, static_cast<double>(c[i]) + (i + 1 == c.size() ? extra : 0.0));
  return worst;
}

// The best slowest chunk over every split of `total` blocks into `chunks` non-empty runs.
double best_slowest(std::size_t total, int chunks, double extra) {
  double best = 1e300;
  std::vector<std::size_t> c;
  std::function<void(std::size_t)> walk = [&](std::size_t left) {
    if (static_cast<int>(c.size()) == chunks - 1) {
      c.push_back(left);
      best = std::min(best, slowest(c, extra));
      c.pop_back();
      return;
    }
    for (std::size_t k = 1; k + (chunks - 1 - c.size()) <= left; ++k) {
      c.push_back(k);
      walk(left - k);
      c.pop_back();
    }
  };
  walk(total);
  return best;
}

TEST(ChunkSplit, WithoutExtraWorkTheBlocksAreSpreadEvenlyEarlierChunksFirst) {
  EXPECT_EQ(counts(4, 2, 0.0), (std::vector<std::size_t>{2, 2}));
  EXPECT_EQ(counts(7, 3, 0.0), (std::vector<std::size_t>{3, 2, 2}));
  EXPECT_EQ(counts(5, 1, 0.0), (std::vector<std::size_t>{5}));
  EXPECT_EQ(counts(5, 1, 3.0), (std::vector<std::size_t>{5})) << "one chunk holds everything";
}

TEST(ChunkSplit, TheLastChunksHeadMakesItHoldFewerBlocksAndTheSlowestChunkIsAsFastAsAnySplitAllows) {
  // The main job's GPT: vocabulary 4096, hidden 256, 4 blocks over 2 stages: the head weighs 4096 / (12 * 256) blocks.
  EXPECT_EQ(counts(4, 2, 4096.0 / (12 * 256)), (std::vector<std::size_t>{3, 1}));
  // A light head leaves the even split alone (the engine tests' GPT: 64 / (12 * 32)).
  EXPECT_EQ(counts(4, 2, 64.0 / (12 * 32)), (std::vector<std::size_t>{2, 2}));
  for (std::size_t total = 1; total <= 10; ++total)
    for (int chunks = 1; chunks <= std::min<int>(4, static_cast<int>(total)); ++chunks)
      for (double extra : {0.17, 0.5, 1.0, 1.33, 2.5, 5.45}) {
        const std::vector<std::size_t> c = counts(total, chunks, extra);
        EXPECT_DOUBLE_EQ(slowest(c, extra), best_slowest(total, chunks, extra))
            << total << " blocks, " << chunks << " chunks, head " << extra;
      }
}

TEST(ChunkSplit, FewerBlocksThanChunksIsAUsageError) {
  ChunkContext c;
  c.virtual_stages = 3;
  EXPECT_THROW(c.blocks(2, 1.0), UsageError);
}

}  // namespace
}  // namespace tenax
