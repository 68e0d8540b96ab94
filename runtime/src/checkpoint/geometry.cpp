#include "checkpoint/geometry.hpp"

#include <algorithm>
#include <stdexcept>

namespace tenax::ckpt {

std::uint64_t volume(const Dims& shape) {
  std::uint64_t v = 1;
  for (auto d : shape)
    if (__builtin_mul_overflow(v, d, &v))
      throw std::overflow_error("shape " + dims_string(shape) + " has more elements than 64 bits can count");
  return v;
}

std::uint64_t byte_size(const Dims& shape, std::size_t elem_size) {
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(volume(shape), static_cast<std::uint64_t>(elem_size), &bytes))
    throw std::overflow_error("shape " + dims_string(shape) + " has more bytes than 64 bits can count");
  return bytes;
}

bool inside(const Box& box, const Dims& global) {
  if (box.offset.size() != global.size() || box.shape.size() != global.size()) return false;
  for (std::size_t i = 0; i < global.size(); ++i)
    if (box.shape[i] == 0 || box.shape[i] > global[i] || box.offset[i] > global[i] - box.shape[i]) return false;
  return true;
}

std::optional<TilingProblem> check_tiling(const Dims& global, const std::vector<const Box*>& boxes) {
  const std::uint64_t total = volume(global);  // throws when it overflows; then no partial sum below can
  for (std::size_t i = 0; i < boxes.size(); ++i)
    if (!inside(*boxes[i], global)) return TilingProblem{TilingProblem::OutOfBounds, i, i, 0};
  std::vector<std::size_t> order(boxes.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(boxes[a]->offset[0], a) < std::pair(boxes[b]->offset[0], b);
  });
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Box& a = *boxes[order[i]];
    const std::uint64_t a_end = a.offset[0] + a.shape[0];  // inside(): no overflow
    for (std::size_t j = i + 1; j < order.size() && boxes[order[j]]->offset[0] < a_end; ++j)
      if (intersect(a, *boxes[order[j]]))
        return TilingProblem{TilingProblem::Overlap, std::min(order[i], order[j]), std::max(order[i], order[j]), 0};
  }
  // Disjoint boxes inside the tensor cover it exactly when their volumes add up to its volume.
  std::uint64_t covered = 0;
  for (const Box* b : boxes)
    covered += volume(b->shape);
  if (covered != total) return TilingProblem{TilingProblem::Uncovered, 0, 0, covered};
  return std::nullopt;
}

std::string dims_string(const Dims& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

std::optional<Box> intersect(const Box& a, const Box& b) {
  if (a.offset.size() != b.offset.size()) return std::nullopt;
  Box r;
  for (std::size_t i = 0; i < a.offset.size(); ++i) {
    std::uint64_t lo = std::max(a.offset[i], b.offset[i]);
    std::uint64_t hi = std::min(a.offset[i] + a.shape[i], b.offset[i] + b.shape[i]);
    if (hi <= lo) return std::nullopt;
    r.offset.push_back(lo);
    r.shape.push_back(hi - lo);
  }
  return r;
}

namespace {
// Row-major element strides of an array of `shape`.
Dims strides_of(const Dims& shape) {
  Dims s(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;)
    s[i - 1] = s[i] * shape[i];
  return s;
}
}  // namespace

void for_each_run(const Dims& box, const Dims& src_shape, const Dims& src_start, const Dims& dst_shape,
                  const Dims& dst_start, std::size_t elem_size,
                  const std::function<void(std::uint64_t, std::uint64_t, std::uint64_t)>& run) {
  const std::size_t n = box.size();
  if (n == 0 || volume(box) == 0) return;
  // Fold trailing dimensions into the run while the box spans them whole in both buffers.
  std::size_t inner = n - 1;
  std::uint64_t run_elems = box[n - 1];
  while (inner > 0 && box[inner] == src_shape[inner] && box[inner] == dst_shape[inner]) {
    --inner;
    run_elems *= box[inner];
  }
  const Dims ss = strides_of(src_shape);
  const Dims ds = strides_of(dst_shape);
  Dims idx(inner, 0);  // position among the outer dimensions [0, inner)
  while (true) {
    std::uint64_t so = 0, dof = 0;
    for (std::size_t i = 0; i < inner; ++i) {
      so += (src_start[i] + idx[i]) * ss[i];
      dof += (dst_start[i] + idx[i]) * ds[i];
    }
    so += src_start[inner] * ss[inner];
    dof += dst_start[inner] * ds[inner];
    for (std::size_t i = inner + 1; i < n; ++i) {
      so += src_start[i] * ss[i];
      dof += dst_start[i] * ds[i];
    }
    run(so * elem_size, dof * elem_size, run_elems * elem_size);
    std::size_t d = inner;
    while (d > 0) {
      --d;
      if (++idx[d] < box[d]) break;
      idx[d] = 0;
      if (d == 0) return;
    }
    if (inner == 0) return;
  }
}

}  // namespace tenax::ckpt
