#include "parallel/init_values.hpp"

#include <cmath>
#include <string_view>
#include <vector>

namespace tenax::detail {

namespace {

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint64_t hash_name(std::string_view s) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

// Uniform in (0, 1], from the top 24 bits (exactly representable in float, never 0 so the log below is finite).
double unit(std::uint64_t bits) {
  return (static_cast<double>(bits >> 40) + 1.0) / 16777216.0;
}

}  // namespace

void fill_init_values(const ParameterSpec& spec, std::uint64_t seed, float* out) {
  const std::size_t rank = spec.shape.size();
  const std::int64_t n = shape_numel(spec.shape);
  if (spec.init != ParameterInit::Normal) {
    const float v = spec.init == ParameterInit::Ones ? 1.0f : 0.0f;
    for (std::int64_t i = 0; i < n; ++i)
      out[i] = v;
    return;
  }
  const std::uint64_t key = mix64(seed ^ hash_name(spec.name));
  std::vector<std::int64_t> idx(rank, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t global = 0;
    for (std::size_t d = 0; d < rank; ++d)
      global = global * spec.global_shape[d] + spec.offset[d] + idx[d];
    // Box-Muller on two counter-based uniforms of the global index.
    const std::uint64_t r = mix64(key ^ mix64(static_cast<std::uint64_t>(global)));
    const double u1 = unit(r);
    const double u2 = unit(mix64(r));
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
    out[i] = static_cast<float>(z * spec.init_std);
    for (std::size_t d = rank; d-- > 0;) {
      if (++idx[d] < spec.shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace tenax::detail
