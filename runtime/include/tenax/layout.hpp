// ProcessGroups: the tensor-, pipeline- and data-parallel communicators of one rank for a ParallelLayout
// (tenax/parallel_layout.hpp, which says how ranks are ordered).
#pragma once

#include <memory>

#include "tenax/communicator.hpp"
#include "tenax/parallel_layout.hpp"

namespace tenax {

// The sub-communicators of one rank, made by splitting `world` (a collective over world).
// Group names: "tp[<pp>,<dp>]", "pp[<tp>,<dp>]", "dp[<tp>,<pp>]".
struct ProcessGroups {
  ParallelLayout layout;
  RankCoords coords;
  Communicator* world = nullptr;
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<Communicator> pp;
  std::unique_ptr<Communicator> dp;

  static ProcessGroups create(Communicator& world, const ParallelLayout& layout);
};

}  // namespace tenax
