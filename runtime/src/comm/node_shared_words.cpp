#include "comm/node_shared_words.hpp"

#include <atomic>

#include "comm/mpi/mpi_communicator.hpp"
#include "core/check_mpi.hpp"
#include "tenax/error.hpp"

namespace tenax::detail {

static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free,
              "the node's shared words are updated by several processes: their atomics must be lock-free");

NodeSharedWords::NodeSharedWords(Communicator& world) {
  auto* mpi = dynamic_cast<MpiCommunicator*>(&world);
  if (mpi == nullptr) throw UsageError("node shared memory needs an MPI communicator, such as Runtime::world()");
  TENAX_CHECK_MPI(MPI_Comm_split_type(mpi->handle(), MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL, &node_));
  TENAX_CHECK_MPI(MPI_Comm_rank(node_, &node_rank_));
  TENAX_CHECK_MPI(MPI_Comm_size(node_, &node_ranks_));
  void* base = nullptr;
  const MPI_Aint bytes = node_rank_ == 0 ? static_cast<MPI_Aint>(kWords * sizeof(std::uint64_t)) : 0;
  TENAX_CHECK_MPI(MPI_Win_allocate_shared(bytes, sizeof(std::uint64_t), MPI_INFO_NULL, node_, &base, &window_));
  MPI_Aint size = 0;
  int unit = 0;
  TENAX_CHECK_MPI(MPI_Win_shared_query(window_, 0, &size, &unit, &base));
  words_ = static_cast<std::uint64_t*>(base);
  if (node_rank_ == 0)
    for (int i = 0; i < kWords; ++i)
      std::atomic_ref<std::uint64_t>(words_[i]).store(0);
  ready();
}

void NodeSharedWords::ready() {
  TENAX_CHECK_MPI(MPI_Barrier(node_));
}

void NodeSharedWords::release() {
  if (window_ != MPI_WIN_NULL) TENAX_CHECK_MPI(MPI_Win_free(&window_));
  if (node_ != MPI_COMM_NULL) TENAX_CHECK_MPI(MPI_Comm_free(&node_));
  words_ = nullptr;
}

}  // namespace tenax::detail
