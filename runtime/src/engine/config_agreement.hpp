// Every rank of an Engine must be given the same EngineConfig, and every data-parallel replica must build the same
// model. Nothing else would notice a rank that was not: given another seed, rate, precision or optimizer it trains a
// replica that silently drifts from the others; another batch or sequence length makes the ranks report different
// losses; another step count hangs the job in a collective the other ranks never join; and another model size makes
// the gradient reduction sum buffers of different sizes, which corrupts memory. Both checks are collectives of a few
// integers per rank, run once while the engine is built.
#pragma once

#include <string>

#include "tenax/communicator.hpp"
#include "tenax/engine.hpp"

namespace tenax::detail {

// Collective over `world`. Throws UsageError (on every rank alike) naming each EngineConfig field that differs between
// ranks, with the first rank whose value differs from rank 0's. Fields that only steer this rank's own resources
// (run_dir, loader_workers) and the validation source itself (a pointer) are not compared.
void check_config_agrees(Communicator& world, const EngineConfig& config);

// Collective over the data-parallel group `dp`: `parameters` is this rank's description of its parameters (names,
// shapes, splits, initialisation), which every replica must share. Throws UsageError (on every rank of the group)
// naming the first data-parallel rank whose model differs from data-parallel rank 0's.
void check_replicas_agree(Communicator& dp, const std::string& parameters);

}  // namespace tenax::detail
