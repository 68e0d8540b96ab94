// Internal: a few 64-bit words in memory that the ranks of one node share (an MPI shared-memory window over the node's
// communicator), read and added to with atomic operations (std::atomic_ref) by every rank of the node: the node's
// host memory budget while the engine builds a model (engine/memory_limit.hpp).
#pragma once

#include <mpi.h>

#include <cstdint>

#include "tenax/communicator.hpp"

namespace tenax::detail {

class NodeSharedWords {
 public:
  static constexpr int kWords = 2;
  // Collective over `world` (an MPI communicator: UsageError otherwise). The words start at 0; node rank 0 may set
  // them before `ready()`, which every rank of the node calls before reading them.
  explicit NodeSharedWords(Communicator& world);
  // Frees the window: collective over the node's ranks, so every rank calls it on the way that did not fail. A window
  // not released is left to MPI_Finalize (freeing it while unwinding from an error would wait for ranks that may be
  // elsewhere).
  void release();
  ~NodeSharedWords() = default;
  NodeSharedWords(const NodeSharedWords&) = delete;
  NodeSharedWords& operator=(const NodeSharedWords&) = delete;

  // Barrier over the node's ranks: what node rank 0 wrote before it is visible after it.
  void ready();
  std::uint64_t* word(int index) const { return words_ + index; }
  int node_rank() const { return node_rank_; }
  int node_ranks() const { return node_ranks_; }

 private:
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Win window_ = MPI_WIN_NULL;
  std::uint64_t* words_ = nullptr;
  int node_rank_ = 0;
  int node_ranks_ = 1;
};

}  // namespace tenax::detail
