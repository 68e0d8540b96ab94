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

// The number of elements. Throws std::overflow_error when it does not fit 64 bits (a hostile manifest or a bad shape).
std::uint64_t volume(const Dims& shape);
// volume(shape) * elem_size, with the same overflow check.
std::uint64_t byte_size(const Dims& shape, std::size_t elem_size);
// True when `box` lies inside a tensor of `global` (same rank, no zero extent), computed without overflow.
bool inside(const Box& box, const Dims& global);
std::string dims_string(const Dims& dims);  // "[4, 8]"
// The common part of two boxes of the same rank, or nothing.
std::optional<Box> intersect(const Box& a, const Box& b);

// Why a set of boxes does not tile a tensor exactly once: `first`/`second` index the boxes concerned.
struct TilingProblem {
  enum Kind { OutOfBounds, Overlap, Uncovered } kind;
  std::size_t first = 0;
  std::size_t second = 0;
  std::uint64_t covered = 0;  // Uncovered: elements the boxes cover (of volume(global))
};
// Checks that `boxes` lie inside `global`, are pairwise disjoint and cover it whole. Sorted by their first row, a
// box can only overlap the boxes that start before its last row ends, so row splits and ZeRO ranges (thousands of
// boxes) cost n log n; boxes that span the same rows (a column split) are compared pairwise, and there are few.
std::optional<TilingProblem> check_tiling(const Dims& global, const std::vector<const Box*>& boxes);

// Calls run(byte offset in the source buffer, byte offset in the destination buffer, bytes) for every contiguous run
// of `box`, in row-major order of the box. The source holds a row-major array of src_shape with the box at src_start,
// likewise the destination. Adjacent rows that are contiguous in both buffers are merged into one run.
void for_each_run(const Dims& box, const Dims& src_shape, const Dims& src_start, const Dims& dst_shape,
                  const Dims& dst_start, std::size_t elem_size,
                  const std::function<void(std::uint64_t, std::uint64_t, std::uint64_t)>& run);

}  // namespace tenax::ckpt
