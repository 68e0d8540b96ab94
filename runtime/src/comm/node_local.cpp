#include "comm/node_local.hpp"

#include <mpi.h>
#include <unistd.h>

#include <array>
#include <set>
#include <string>
#include <vector>

#include "comm/agreement.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "core/check_mpi.hpp"
#include "core/host_name.hpp"
#include "tenax/env.hpp"
#include "tenax/log.hpp"

namespace tenax::detail {
namespace {

LocalRank by_shared_memory(MpiCommunicator& world) {
  MPI_Comm node = MPI_COMM_NULL;
  TENAX_CHECK_MPI(MPI_Comm_split_type(world.handle(), MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL, &node));
  LocalRank local;
  TENAX_CHECK_MPI(MPI_Comm_rank(node, &local.rank));
  TENAX_CHECK_MPI(MPI_Comm_size(node, &local.size));
  TENAX_CHECK_MPI(MPI_Comm_free(&node));
  // One rank per node is its node's first: counting them counts the nodes.
  const int first = local.rank == 0 ? 1 : 0;
  TENAX_CHECK_MPI(MPI_Allreduce(&first, &local.nodes, 1, MPI_INT, MPI_SUM, world.handle()));
  return local;
}

LocalRank by_host_name(Communicator& world) {
  const std::vector<std::string> hosts = all_gather_strings(world, detail::host_name());
  LocalRank local{0, 0, static_cast<int>(std::set<std::string>(hosts.begin(), hosts.end()).size())};
  for (int r = 0; r < world.size(); ++r) {
    if (hosts[static_cast<std::size_t>(r)] != hosts[static_cast<std::size_t>(world.rank())]) continue;
    if (r < world.rank()) ++local.rank;
    ++local.size;
  }
  return local;
}

}  // namespace

LocalRank node_local_rank(Communicator& world) {
  auto* mpi = dynamic_cast<MpiCommunicator*>(&world);
  LocalRank local = mpi != nullptr ? by_shared_memory(*mpi) : by_host_name(world);
  if (env::is_set("TENAX_LOCAL_RANK") && env::is_set("TENAX_WORLD_SIZE") &&
      env::get_int("TENAX_WORLD_SIZE") == world.size()) {
    const long long slot = env::get_int("TENAX_LOCAL_RANK");
    if (slot >= 0 && slot < local.size)
      local.rank = static_cast<int>(slot);
    else
      TENAX_LOG(Warn, "comm") << "ignoring TENAX_LOCAL_RANK=" << slot << ": this node has " << local.size
                              << " rank(s) of the job; using the node-local rank " << local.rank;
  }
  return local;
}

}  // namespace tenax::detail
