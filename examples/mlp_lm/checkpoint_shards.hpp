// The training state as tenax::Checkpointer blocks: one TensorShard per Trainer::state_entries() entry.
//
// A ZeRO-1 optimizer tensor (master weights, moments) arrives as up to 2*rank-1 boxes per rank and parameter (ZeRO
// shards the flat buffer, so a rank's range starts and ends mid-row); the checkpointer takes several blocks of one
// tensor per rank, so every box is passed as it is: no gathering over the data-parallel group before a save and no
// scattering after a load.
#pragma once

#include <vector>

#include "tenax/checkpoint.hpp"
#include "tenax/model_state.hpp"

namespace tenax::examples {

// primary_only: one holder per element (for writing); otherwise every holder (a load must fill every replica).
std::vector<TensorShard> checkpoint_shards(const std::vector<StateEntry>& entries, bool primary_only);

}  // namespace tenax::examples
