// Who writes what: every rank's shard list is exchanged once, checked for consistency, and each distinct block is
// assigned to one of the ranks that hold it, spreading the bytes over the holders (so a block replicated across
// data-parallel ranks is written once, and the replicas share the writing).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/geometry.hpp"
#include "tenax/checkpoint.hpp"

namespace tenax::ckpt {

// Fills empty offset/shape and checks one rank's shards (names, ranks of shapes, bounds, pointers, a block given
// twice). A rank may hold several blocks of one tensor (e.g. ZeRO-1 ranges that start and end mid-row).
// Throws UsageError naming the shard and the fix.
void normalize_shards(std::vector<TensorShard>& shards);

// One line per shard: what the other ranks need to know to build the plan.
std::string describe_shards(const std::vector<TensorShard>& shards);

struct PlannedTensor {
  std::string name;
  DType dtype = DType::F32;
  Dims global_shape;
  std::vector<int> blocks;  // indices into Plan::blocks
};

struct PlannedBlock {
  int tensor = 0;  // index into Plan::tensors
  Box box;
  int writer = 0;       // world rank that writes it (one of its holders)
  std::string dataset;  // its dataset in the writer's file (block_dataset())
};

struct Plan {
  std::vector<PlannedTensor> tensors;  // sorted by name
  std::vector<PlannedBlock> blocks;
};

// Builds the plan from every rank's describe_shards() text (index = rank). Identical on every rank. Each block is
// written by one of its holders: blocks are taken largest first, each by the holder with the fewest bytes so far
// (ties: the lowest rank). Throws UsageError
// naming the tensor and ranks when ranks disagree on dtype or global shape, when distinct blocks overlap, when part of
// a tensor is held by no rank, or when one tensor's name is a '/'-prefix of another's.
Plan make_plan(const std::vector<std::string>& per_rank);

// Index of the block with this tensor name and box, or -1.
int find_block(const Plan& plan, const std::string& name, const Box& box);

}  // namespace tenax::ckpt
