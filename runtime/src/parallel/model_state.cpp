#include "tenax/model_state.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "tenax/error.hpp"

namespace tenax {

void ParameterSpec::validate() const {
  if (global_shape.size() != offset.size() || global_shape.size() != shape.size())
    throw UsageError("parameter " + name + ": global shape, offset and shape must have the same rank");
  if (!std::isfinite(init_std) || init_std < 0)
    throw UsageError("parameter " + name + ": its initialisation's standard deviation is " + std::to_string(init_std) +
                     "; give a finite value >= 0");
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (offset[d] < 0 || shape[d] < 0 || offset[d] + shape[d] > global_shape[d])
      throw UsageError("parameter " + name + ": shard at offset " + shape_to_string(offset) + " with shape " +
                       shape_to_string(shape) + " lies outside the global shape " + shape_to_string(global_shape));
  }
}

namespace {

// Decomposes [begin, begin+count) of a row-major tensor `shape` (dimensions from `dim` on) into boxes; `prefix` holds
// the fixed indices of the outer dimensions.
void decompose(const Shape& shape, std::size_t dim, Shape prefix, std::int64_t begin, std::int64_t count,
               std::int64_t flat_base, std::vector<LocalBox>& out) {
  if (count <= 0) return;
  const std::size_t rank = shape.size();
  auto emit = [&](std::int64_t first, std::int64_t rows) {
    LocalBox box;
    box.offset = prefix;
    box.offset.push_back(first);
    box.shape.assign(dim, 1);
    box.shape.push_back(rows);
    for (std::size_t d = dim + 1; d < rank; ++d) {
      box.offset.push_back(0);
      box.shape.push_back(shape[d]);
    }
    std::int64_t row = 1;
    for (std::size_t d = dim + 1; d < rank; ++d)
      row *= shape[d];
    box.flat_begin = flat_base + first * row;
    out.push_back(std::move(box));
  };
  if (dim + 1 == rank) {
    emit(begin, count);
    return;
  }
  std::int64_t row = 1;  // elements per index of dimension `dim`
  for (std::size_t d = dim + 1; d < rank; ++d)
    row *= shape[d];
  std::int64_t end = begin + count;
  // A partial leading row: recurse into it.
  if (begin % row != 0) {
    const std::int64_t r = begin / row;
    const std::int64_t stop = std::min(end, (r + 1) * row);
    Shape inner = prefix;
    inner.push_back(r);
    decompose(shape, dim + 1, inner, begin - r * row, stop - begin, flat_base + r * row, out);
    begin = stop;
  }
  if (begin >= end) return;
  // Whole rows.
  const std::int64_t full_rows = (end - begin) / row;
  if (full_rows > 0) {
    emit(begin / row, full_rows);
    begin += full_rows * row;
  }
  // A partial trailing row.
  if (begin < end) {
    const std::int64_t r = begin / row;
    Shape inner = prefix;
    inner.push_back(r);
    decompose(shape, dim + 1, inner, 0, end - begin, flat_base + r * row, out);
  }
}

std::uint64_t mix64(std::uint64_t x) {  // splitmix64's finaliser: a bijection with good avalanche
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

std::uint64_t hash_name(std::string_view s) {  // FNV-1a
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

}  // namespace

std::vector<LocalBox> boxes_of_flat_range(const Shape& local_shape, std::int64_t begin, std::int64_t count) {
  const std::int64_t numel = shape_numel(local_shape);
  if (begin < 0 || count < 0 || begin + count > numel)
    throw std::logic_error("boxes_of_flat_range: range outside the tensor");
  std::vector<LocalBox> out;
  if (count == 0) return out;
  if (local_shape.empty()) {
    out.push_back({{}, {}, 0});
    return out;
  }
  decompose(local_shape, 0, {}, begin, count, 0, out);
  return out;
}

std::uint64_t global_checksum(const std::vector<StateEntry>& entries, Communicator& world) {
  std::uint64_t local = 0;
  for (const StateEntry& e : entries) {
    if (e.device != Device::Host)
      throw UsageError("global_checksum: entry " + e.name +
                       " lives in device memory; checksum the host copies of a HostStateMirror instead");
    if (!e.primary) continue;
    const std::uint64_t name_hash = hash_name(e.name);
    const std::size_t elem = dtype_size(e.dtype);
    const std::int64_t n = shape_numel(e.shape);
    const std::size_t rank = e.shape.size();
    // Walk the box in row-major order, tracking the global flat index of each element.
    std::vector<std::int64_t> idx(rank, 0);
    const auto* bytes = static_cast<const unsigned char*>(e.data);
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t global = 0;
      for (std::size_t d = 0; d < rank; ++d)
        global = global * e.global_shape[d] + e.offset[d] + idx[d];
      std::uint64_t bits = 0;
      std::memcpy(&bits, bytes + static_cast<std::size_t>(i) * elem, elem);
      local += mix64(name_hash ^ mix64(static_cast<std::uint64_t>(global) ^ (bits << 1 | 1) * 0x9E3779B97F4A7C15ull));
      for (std::size_t d = rank; d-- > 0;) {
        if (++idx[d] < e.shape[d]) break;
        idx[d] = 0;
      }
    }
  }
  // Gathered rather than summed by the communicator: the combination is unsigned modular addition, which no MPI
  // reduction op on signed integers guarantees.
  std::vector<std::uint64_t> all(static_cast<std::size_t>(world.size()));
  world.all_gather(&local, all.data(), 1, DType::I64);
  std::uint64_t total = 0;
  for (std::uint64_t v : all)
    total += v;
  return total;
}

}  // namespace tenax
