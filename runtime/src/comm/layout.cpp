#include "tenax/layout.hpp"

#include <string>

#include "tenax/log.hpp"

namespace tenax {

ProcessGroups ProcessGroups::create(Communicator& world, const ParallelLayout& layout) {
  layout.validate(world.size());
  ProcessGroups groups;
  groups.layout = layout;
  groups.world = &world;
  groups.coords = coords_of(layout, world.rank());
  const RankCoords& c = groups.coords;
  // Colors enumerate the groups; keys order members by their coordinate along the group's axis.
  const auto pair = [](int a, int b) { return "[" + std::to_string(a) + "," + std::to_string(b) + "]"; };
  groups.tp = world.split(c.pp * layout.dp + c.dp, c.tp, "tp" + pair(c.pp, c.dp));
  groups.pp = world.split(c.tp * layout.dp + c.dp, c.pp, "pp" + pair(c.tp, c.dp));
  groups.dp = world.split(c.tp * layout.pp + c.pp, c.dp, "dp" + pair(c.tp, c.pp));
  TENAX_LOG(Info, "comm") << "layout " << layout.to_string() << ": rank " << world.rank() << " is tp " << c.tp
                          << ", pp " << c.pp << ", dp " << c.dp;
  return groups;
}

}  // namespace tenax
