#include "checkpoint_state_view.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

namespace tenax::examples {
namespace {

std::vector<std::uint64_t> unsigned_dims(const Shape& s) {
  return {s.begin(), s.end()};
}

TensorShard shard_of(const StateEntry& e) {
  return TensorShard::block(e.name, e.dtype, unsigned_dims(e.global_shape), unsigned_dims(e.offset),
                            unsigned_dims(e.shape), e.data);
}

// "adamw.m/blocks.0.fc1.weight" -> {"adamw.m", "blocks.0.fc1.weight"}
std::pair<std::string, std::string> split_name(const std::string& name) {
  const auto slash = name.find('/');
  if (slash == std::string::npos) throw std::logic_error("state entry '" + name + "' has no '<kind>/' prefix");
  return {name.substr(0, slash), name.substr(slash + 1)};
}

// Copies the elements of `piece` (a box inside `block`, both row-major and contiguous) to or from `block_data`.
void copy_piece(const StateEntry& block, float* block_data, const StateEntry& piece, bool into_block) {
  const std::size_t rank = block.shape.size();
  if (rank == 0 || piece.shape.size() != rank || piece.offset.size() != rank)
    throw std::logic_error("state entry '" + piece.name + "' has another rank than its parameter");
  std::vector<std::int64_t> block_stride(rank, 1);
  for (std::size_t d = rank - 1; d > 0; --d)
    block_stride[d - 1] = block_stride[d] * block.shape[d];
  const std::int64_t row = piece.shape[rank - 1];
  const std::int64_t rows = shape_numel(piece.shape) / std::max<std::int64_t>(row, 1);
  auto* piece_data = static_cast<float*>(piece.data);
  std::vector<std::int64_t> index(rank, 0);  // position of the current row inside the piece (last dim stays 0)
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t at = 0;
    for (std::size_t d = 0; d < rank; ++d)
      at += (piece.offset[d] - block.offset[d] + index[d]) * block_stride[d];
    float* dst = into_block ? block_data + at : piece_data + r * row;
    const float* src = into_block ? piece_data + r * row : block_data + at;
    std::memcpy(dst, src, static_cast<std::size_t>(row) * sizeof(float));
    for (std::size_t d = rank - 1; d-- > 0;) {  // next row: odometer over all but the last dim
      if (++index[d] < piece.shape[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

CheckpointStateView::CheckpointStateView(std::vector<StateEntry> entries, Communicator& world, Communicator& dp)
    : dp_(dp) {
  std::map<std::string, const StateEntry*> params;  // parameter name -> its block on this rank
  std::set<std::string> kinds;                      // optimizer state kinds: "master", "adamw.m", ...
  bool pieces = false;
  for (const StateEntry& e : entries) {
    auto [kind, name] = split_name(e.name);
    if (kind == "param") {
      params[name] = &e;
      continue;
    }
    kinds.insert(kind);
  }
  for (const StateEntry& e : entries) {
    auto [kind, name] = split_name(e.name);
    if (kind == "param") continue;
    auto it = params.find(name);
    if (it == params.end()) throw std::logic_error("state entry '" + e.name + "' has no parameter '" + name + "'");
    if (e.offset != it->second->offset || e.shape != it->second->shape) pieces = true;
  }
  // Every rank must describe a tensor the same way, so one rank with ZeRO pieces makes every rank assemble.
  std::int32_t any = pieces ? 1 : 0;
  world.all_reduce(&any, &any, 1, DType::I32, ReduceOp::Max);
  if (any == 0) {
    direct_ = std::move(entries);
    return;
  }

  std::map<std::string, std::size_t> index;  // full entry name -> assembled_ position
  std::size_t floats = 0;
  for (const auto& [name, param] : params)
    for (const std::string& kind : kinds) {
      Assembled a;
      a.block = *param;
      a.block.name = kind + "/" + name;
      a.block.dtype = DType::F32;
      a.block.data = reinterpret_cast<void*>(floats);  // an offset until storage_ exists
      floats += static_cast<std::size_t>(shape_numel(param->shape));
      index[a.block.name] = assembled_.size();
      assembled_.push_back(std::move(a));
    }
  for (const StateEntry& e : entries) {
    auto [kind, name] = split_name(e.name);
    if (kind == "param") {
      direct_.push_back(e);
      continue;
    }
    if (e.dtype != DType::F32) throw std::logic_error("optimizer state '" + e.name + "' is not fp32");
    assembled_[index.at(e.name)].pieces.push_back(e);
  }
  storage_.assign(floats, 0.0f);
  for (Assembled& a : assembled_)
    a.block.data = storage_.data() + reinterpret_cast<std::size_t>(a.block.data);
}

std::vector<TensorShard> CheckpointStateView::shards(bool primary_only) {
  std::vector<TensorShard> out;
  for (const StateEntry& e : direct_)
    if (!primary_only || e.primary) out.push_back(shard_of(e));
  for (const Assembled& a : assembled_)
    if (!primary_only || a.block.primary) out.push_back(shard_of(a.block));
  return out;
}

void CheckpointStateView::before_save() {
  if (assembled_.empty()) return;
  // Each element is owned by exactly one data-parallel rank; the others contribute -0.0, the identity of
  // floating-point addition (x + -0.0 == x bit for bit, +0.0 and NaN included), so the sum is the owner's value.
  std::fill(storage_.begin(), storage_.end(), -0.0f);
  for (Assembled& a : assembled_)
    for (const StateEntry& piece : a.pieces)
      copy_piece(a.block, static_cast<float*>(a.block.data), piece, /*into_block=*/true);
  dp_.all_reduce(storage_.data(), storage_.data(), storage_.size(), DType::F32, ReduceOp::Sum);
}

void CheckpointStateView::after_load() {
  for (Assembled& a : assembled_)
    for (const StateEntry& piece : a.pieces)
      copy_piece(a.block, static_cast<float*>(a.block.data), piece, /*into_block=*/false);
}

}  // namespace tenax::examples
