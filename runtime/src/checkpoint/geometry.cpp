#include "checkpoint/geometry.hpp"

namespace tenax::ckpt {

std::uint64_t volume(const Dims& shape) {
  std::uint64_t v = 1;
  for (auto d : shape)
    v *= d;
  return v;
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
