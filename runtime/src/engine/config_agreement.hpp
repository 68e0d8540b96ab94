// Every rank of an Engine must be given the same EngineConfig, and every data-parallel replica (and every rank of a
// tensor-parallel group, but for its blocks' offsets) must build the same model. Nothing else would notice a rank that
// was not: given another seed, rate, precision or optimizer it trains a replica that silently drifts from the others;
// another batch or sequence length makes the ranks report different losses; another step count hangs the job in a
// collective the other ranks never join; and another model size makes the gradient reduction sum buffers of different
// sizes, which corrupts memory. The checks are collectives of a few integers per rank, run once while the engine is
// built.
#pragma once

#include <string>

#include "tenax/communicator.hpp"
#include "tenax/engine.hpp"

namespace tenax::detail {

// Collective over `world`. Throws UsageError (on every rank alike) naming each EngineConfig field that differs between
// ranks, with the first rank whose value differs from rank 0's. Fields that only steer this rank's own resources
// (run_dir, loader_workers) and the validation source itself (a pointer) are not compared.
void check_config_agrees(Communicator& world, const EngineConfig& config);

// Collective over `group`, the data-parallel or the tensor-parallel group: `parameters` is this rank's description of
// its parameters (names, shapes, splits, initialisation; without the shard offsets for the tensor-parallel group,
// whose ranks hold different blocks of the same tensors), which every rank of the group must share. Throws UsageError
// (on every rank of the group) naming the group and its first rank whose model differs from its rank 0's.
enum class ModelGroup { DataParallel, TensorParallel };
void check_group_models_agree(Communicator& group, ModelGroup kind, const std::string& parameters);

}  // namespace tenax::detail
