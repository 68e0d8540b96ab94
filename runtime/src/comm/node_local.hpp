// Internal: this rank's place among the ranks of its node, for choosing its GPU, and the number of nodes of the world.
#pragma once

#include "tenax/communicator.hpp"

namespace tenax::detail {

struct LocalRank {
  int rank = 0;   // this rank's index on its node (its GPU slot)
  int size = 1;   // ranks of `world` on this node
  int nodes = 1;  // nodes that `world` spans (a job's failure rate grows with them: the automatic checkpoint interval)
};

// Collective over `world`. The node is what MPI says shares memory with this rank (MPI_Comm_split_type with
// MPI_COMM_TYPE_SHARED; a communicator of another backend falls back to comparing host names). Under the SPANK plugin
// the slot is the one it assigned after placement (TENAX_LOCAL_RANK, used when TENAX_WORLD_SIZE matches the world and
// the slot lies inside the node's ranks).
LocalRank node_local_rank(Communicator& world);

}  // namespace tenax::detail
