// Rectangular blocks of row-major tensors: intersection and copying, the arithmetic behind resharding.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tenax::ckpt {

using Dims = std::vector<std::uint64_t>;

struct Box {
  Dims offset;
  Dims shape;
  friend bool operator==(const Box&, const Box&) = default;
};

std::uint64_t volume(const Dims& shape);
std::string dims_string(const Dims& dims);  // "[4, 8]"
// The common part of two boxes of the same rank, or nothing.
std::optional<Box> intersect(const Box& a, const Box& b);

// Calls run(byte offset in the source buffer, byte offset in the destination buffer, bytes) for every contiguous run
// of `box`, in row-major order of the box. The source holds a row-major array of src_shape with the box at src_start,
// likewise the destination. Adjacent rows that are contiguous in both buffers are merged into one run.
void for_each_run(const Dims& box, const Dims& src_shape, const Dims& src_start, const Dims& dst_shape,
                  const Dims& dst_start, std::size_t elem_size,
                  const std::function<void(std::uint64_t, std::uint64_t, std::uint64_t)>& run);

}  // namespace tenax::ckpt
