// Candidate arrangements of the layout's units for place_ranks. A unit is one TP group, u = d + dp * p (replica d,
// stage p); an arrangement is the order the packer receives the units in and the grains (sizes in units, coarse to
// fine) whose aligned runs it should keep under one switch. Every arrangement is a pure function of the layout (and,
// for tiles, of the tree's capacities and the step's traffic), so every task computes the same candidates.
#pragma once

#include <string>
#include <vector>

#include "tenax/placement.hpp"

namespace tenax::placement_detail {

struct Arrangement {
  std::string name;
  std::vector<int> unit_at_position;
  std::vector<long> grains;
};

std::vector<int> divisors(int n);

// Blocks of b replicas x all pp stages (complete pipelines), d fastest inside a block. Grains: the block, then `a`
// consecutive stages of it (a = 0: none), then one stage's b replicas. b = dp is the rank order (each stage's DP row
// together), b = 1 puts whole pipelines together.
Arrangement replica_blocks(const ParallelLayout& layout, int b, int a);

// Slabs of `a` consecutive stages across all replicas, the a stages of one replica adjacent: any run of the order is
// a tile of a stages x (length / a) replicas, whatever the size of the switch it lands under.
Arrangement stage_slabs(const ParallelLayout& layout, int a);

// Nested tiles, one per level: level k's tile is A_k stages x B_k replicas, made of level (k-1) tiles, chosen so that
// it fits the typical room of a level-k domain (units_per_domain[k], in units) and, among the shapes that fit, the
// estimated traffic leaving such a domain is least (a DP ring over dp replicas cut into dp / B pieces crosses dp / B
// times; a pipeline cut into pp / A pieces crosses pp / A - 1 times). The top tile is the whole pp x dp grid.
// Sub-tiles are ordered replica-fastest when d_fastest, stage-fastest otherwise.
Arrangement nested_tiles(const ParallelLayout& layout, const std::vector<long>& units_per_domain,
                         const StepTraffic& traffic, bool d_fastest, const std::string& label);

}  // namespace tenax::placement_detail
