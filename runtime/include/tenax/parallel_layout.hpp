// ParallelLayout: how the world's ranks are arranged into tensor- (tp), pipeline- (pp) and data-parallel (dp) groups.
// Pure arithmetic on the standard library (no communicator), so that the SPANK plugin and the placement library use
// the same definition as the runtime; tenax/layout.hpp adds the communicators of one rank (ProcessGroups).
//
// Rank order: tp varies fastest, then dp, then pp:  rank = tp_index + tp * (dp_index + dp * pp_index).
// A TP group is therefore tp consecutive ranks (one node, where the heaviest traffic stays on the fastest links), and
// the pipeline stages are the furthest apart (their point-to-point traffic is the lightest).
#pragma once

#include <string>
#include <string_view>

namespace tenax {

struct ParallelLayout {
  int tp = 1;
  int pp = 1;
  int dp = 1;

  int world_size() const { return tp * pp * dp; }
  // Throws UsageError unless every degree is >= 1 and tp*pp*dp == world_size (naming the sizes and the fix).
  void validate(int world_size) const;
  std::string to_string() const;  // "tp=2,pp=1,dp=2"
  // Parses "tp=2,pp=1,dp=2" (any order, missing = 1) or "2x1x2" (tp x pp x dp). Throws UsageError, also when
  // tp*pp*dp exceeds INT_MAX (the ranks must fit an int).
  static ParallelLayout parse(std::string_view text);
  // dp chosen so that tp*pp*dp == world_size. Throws UsageError if tp*pp does not divide it.
  static ParallelLayout infer(int world_size, int tp, int pp);

  friend bool operator==(const ParallelLayout&, const ParallelLayout&) = default;
};

struct RankCoords {
  int tp = 0;
  int pp = 0;
  int dp = 0;
  friend bool operator==(const RankCoords&, const RankCoords&) = default;
};

RankCoords coords_of(const ParallelLayout& layout, int rank);
int rank_of(const ParallelLayout& layout, const RankCoords& coords);

}  // namespace tenax
