// A synthetic model for checkpoint tests, described for any (tp, pp, dp) layout the way a training runtime would:
//   embed             [12, 8]  f32   vocab-parallel (rows split over tp), pipeline stage 0, replicated over dp
//   layers.<i>.w1     [8, 16]  f32   column-parallel (dim 1 split over tp), stage i*pp/L
//   layers.<i>.w2     [16, 8]  bf16  row-parallel (dim 0 split over tp)
//   layers.<i>.bias   [8]      f64   replicated over tp and dp
//   head/scale        [1]      i64   last stage, replicated
//   optim/exp_avg     [1003]   f32   ZeRO-1: a flat range per dp rank (uneven split), replicated over tp and pp
//   optim/master      [13, 7]  f32   ZeRO-1 of a 2-d tensor: each dp rank's flat range as up to three boxes (the end
//                                    of a row, whole rows, the start of a row), replicated over tp and pp
// Every element's bits are a function of (seed, tensor, global index), so any rank can check any block it loaded.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tenax/checkpoint.hpp"
#include "tenax/layout.hpp"

namespace tenax::test {

inline constexpr int kLayers = 4;

inline std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

inline std::uint64_t name_hash(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (char c : s)
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

// The bytes of element `index` of tensor `name` (finite values for the float types, exact in decimal for f32).
inline void element_bytes(std::uint64_t seed, const std::string& name, DType dtype, std::uint64_t index, void* out) {
  std::uint64_t h = mix(seed * 0x9e3779b97f4a7c15ull ^ name_hash(name) ^ mix(index + 1));
  switch (dtype) {
    case DType::F32: {
      float v = static_cast<float>(static_cast<std::int64_t>(h % 400000) - 200000) / 4.0f;
      std::memcpy(out, &v, 4);
      break;
    }
    case DType::F64: {
      double v = static_cast<double>(static_cast<std::int64_t>(h % 2000000) - 1000000) / 8.0;
      std::memcpy(out, &v, 8);
      break;
    }
    case DType::BF16:
    case DType::F16: {
      std::uint16_t v = static_cast<std::uint16_t>((h & 0x3fff) | ((h >> 20) & 0x8000));
      std::memcpy(out, &v, 2);
      break;
    }
    case DType::I32: {
      std::int32_t v = static_cast<std::int32_t>(h);
      std::memcpy(out, &v, 4);
      break;
    }
    case DType::I64:
      std::memcpy(out, &h, 8);
      break;
    case DType::U8: {
      std::uint8_t v = static_cast<std::uint8_t>(h);
      std::memcpy(out, &v, 1);
      break;
    }
  }
}

// One rank's shards with their own storage.
struct TestModel {
  std::vector<TensorShard> shards;
  std::vector<std::vector<std::uint8_t>> storage;

  TestModel() = default;
  TestModel(const TestModel&) = delete;
  TestModel& operator=(const TestModel&) = delete;
  TestModel(TestModel&&) = default;
  TestModel& operator=(TestModel&&) = default;

  void add(TensorShard s) {
    storage.emplace_back(s.bytes(), 0xA5);
    s.data = storage.back().data();
    shards.push_back(std::move(s));
  }
  TensorShard* find(const std::string& name) {
    for (auto& s : shards)
      if (s.name == name) return &s;
    return nullptr;
  }
};

// A flat range [begin, begin+count) of a [rows, cols] tensor as row-major boxes: the rest of the first row, the whole
// rows, the start of the last row (those that are not empty).
inline std::vector<TensorShard> range_as_boxes(const std::string& name, DType dtype, std::uint64_t rows,
                                               std::uint64_t cols, std::uint64_t begin, std::uint64_t count) {
  std::vector<TensorShard> out;
  std::uint64_t at = begin;
  const std::uint64_t end = begin + count;
  if (at % cols != 0 && at < end) {
    const std::uint64_t n = std::min(end, (at / cols + 1) * cols) - at;
    out.push_back(TensorShard::block(name, dtype, {rows, cols}, {at / cols, at % cols}, {1, n}, nullptr));
    at += n;
  }
  if (end - at >= cols) {
    const std::uint64_t full = (end - at) / cols;
    out.push_back(TensorShard::block(name, dtype, {rows, cols}, {at / cols, 0}, {full, cols}, nullptr));
    at += full * cols;
  }
  if (at < end) out.push_back(TensorShard::block(name, dtype, {rows, cols}, {at / cols, 0}, {1, end - at}, nullptr));
  return out;
}

inline TestModel make_model(const ParallelLayout& layout, int rank, std::uint64_t extra_f32_elems = 0) {
  const RankCoords c = coords_of(layout, rank);
  TestModel m;
  const std::uint64_t H = 8, F = 16, V = 12;
  const std::uint64_t tp = layout.tp, t = c.tp;
  auto stage_of = [&](int layer) { return layer * layout.pp / kLayers; };
  if (c.pp == 0) m.add(TensorShard::block("embed", DType::F32, {V, H}, {t * V / tp, 0}, {V / tp, H}, nullptr));
  for (int i = 0; i < kLayers; ++i) {
    if (stage_of(i) != c.pp) continue;
    const std::string p = "layers." + std::to_string(i) + ".";
    m.add(TensorShard::block(p + "w1", DType::F32, {H, F}, {0, t * F / tp}, {H, F / tp}, nullptr));
    m.add(TensorShard::block(p + "w2", DType::BF16, {F, H}, {t * F / tp, 0}, {F / tp, H}, nullptr));
    m.add(TensorShard::whole(p + "bias", DType::F64, {H}, nullptr));
  }
  if (c.pp == layout.pp - 1) m.add(TensorShard::whole("head/scale", DType::I64, {1}, nullptr));
  const std::uint64_t total = 1003, dp = layout.dp, d = c.dp;
  const std::uint64_t base = total / dp, extra = total % dp;
  const std::uint64_t begin = d * base + std::min<std::uint64_t>(d, extra);
  m.add(TensorShard::flat_range("optim/exp_avg", DType::F32, total, begin, base + (d < extra ? 1 : 0), nullptr));
  const std::uint64_t rows = 13, cols = 7, per = rows * cols / dp, more = rows * cols % dp;
  for (TensorShard& box :
       range_as_boxes("optim/master", DType::F32, rows, cols, d * per + std::min(d, more), per + (d < more ? 1 : 0)))
    m.add(std::move(box));
  if (extra_f32_elems > 0)  // a big per-rank tensor for disk-full and kill tests
    m.add(TensorShard::flat_range("bulk", DType::F32, extra_f32_elems * layout.world_size(), extra_f32_elems * rank,
                                  extra_f32_elems, nullptr));
  return m;
}

// Calls f(global row-major index, element pointer) for every element of the shard.
template <class F>
void for_each_element(const TensorShard& s, F f) {
  const std::size_t n = s.shape.size(), es = dtype_size(s.dtype);
  std::vector<std::uint64_t> idx(n, 0);
  auto* p = static_cast<std::uint8_t*>(s.data);
  const std::uint64_t count = s.elements();
  for (std::uint64_t e = 0; e < count; ++e) {
    std::uint64_t g = 0;
    for (std::size_t i = 0; i < n; ++i)
      g = g * s.global_shape[i] + s.offset[i] + idx[i];
    f(g, p + e * es);
    for (std::size_t i = n; i-- > 0;) {
      if (++idx[i] < s.shape[i]) break;
      idx[i] = 0;
    }
  }
}

inline void fill(TestModel& m, std::uint64_t seed) {
  for (auto& s : m.shards) {
    if (s.offset.empty()) s.offset.assign(s.global_shape.size(), 0);
    if (s.shape.empty()) s.shape = s.global_shape;
    for_each_element(s, [&](std::uint64_t g, std::uint8_t* p) { element_bytes(seed, s.name, s.dtype, g, p); });
  }
}

inline void scramble(TestModel& m) {
  for (auto& b : m.storage)
    std::memset(b.data(), 0x5A, b.size());
}

// Number of elements whose bytes differ from the pattern of `seed`; the first mismatch is described in `first`.
inline std::uint64_t mismatches(TestModel& m, std::uint64_t seed, std::string* first = nullptr) {
  std::uint64_t bad = 0;
  for (auto& s : m.shards) {
    if (s.offset.empty()) s.offset.assign(s.global_shape.size(), 0);
    if (s.shape.empty()) s.shape = s.global_shape;
    const std::size_t es = dtype_size(s.dtype);
    for_each_element(s, [&](std::uint64_t g, std::uint8_t* p) {
      std::uint8_t want[8];
      element_bytes(seed, s.name, s.dtype, g, want);
      if (std::memcmp(want, p, es) != 0) {
        if (bad == 0 && first) *first = s.name + " element " + std::to_string(g);
        ++bad;
      }
    });
  }
  return bad;
}

}  // namespace tenax::test
