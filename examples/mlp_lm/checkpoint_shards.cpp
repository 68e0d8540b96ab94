#include "checkpoint_shards.hpp"

namespace tenax::examples {
namespace {

std::vector<std::uint64_t> unsigned_dims(const Shape& s) {
  return {s.begin(), s.end()};
}

}  // namespace

std::vector<TensorShard> checkpoint_shards(const std::vector<StateEntry>& entries, bool primary_only) {
  std::vector<TensorShard> out;
  for (const StateEntry& e : entries)
    if (!primary_only || e.primary) {
      out.push_back(TensorShard::block(e.name, e.dtype, unsigned_dims(e.global_shape), unsigned_dims(e.offset),
                                       unsigned_dims(e.shape), e.data));
      out.back().memory = e.device == Device::Cuda ? MemoryKind::Device : MemoryKind::Host;
    }
  return out;
}

}  // namespace tenax::examples
