// The training state as tenax::Checkpointer wants it: at most one block per tensor per rank.
//
// Trainer::state_entries() describes a ZeRO-1 optimizer tensor (master weights, moments) as up to three boxes per rank
// and parameter (ZeRO shards the flat buffer, so a rank's range starts and ends mid-row), and a rank's range may even
// cross several parameters. The checkpointer takes one rectangular block per tensor and rank, so with ZeRO-1 the view
// assembles each optimizer tensor's whole tensor-parallel shard (the block of the matching parameter) from the
// data-parallel ranks before a save, and hands each rank its own boxes back after a load. Without ZeRO-1 the entries
// already are single blocks and are passed through untouched.
#pragma once

#include <cstddef>
#include <vector>

#include "tenax/checkpoint.hpp"
#include "tenax/communicator.hpp"
#include "tenax/model_state.hpp"

namespace tenax::examples {

class CheckpointStateView {
 public:
  // Collective over `world` (agrees whether any rank holds ZeRO pieces). `dp` is this rank's data-parallel group.
  CheckpointStateView(std::vector<StateEntry> entries, Communicator& world, Communicator& dp);

  // The blocks to save or load. primary_only: one holder per element (for writing); otherwise every holder (a load
  // must fill every replica).
  std::vector<TensorShard> shards(bool primary_only);
  // Before each save; collective over the data-parallel group when ZeRO pieces are assembled.
  void before_save();
  // After a load into shards(false): hands the loaded values to the ZeRO pieces.
  void after_load();
  bool assembles_zero_pieces() const { return !assembled_.empty(); }

 private:
  struct Assembled {
    StateEntry block;                // the whole tensor-parallel shard; data points into storage_
    std::vector<StateEntry> pieces;  // this rank's ZeRO boxes of it
  };
  std::vector<StateEntry> direct_;  // entries that are single blocks already
  std::vector<Assembled> assembled_;
  std::vector<float> storage_;
  Communicator& dp_;
};

}  // namespace tenax::examples
