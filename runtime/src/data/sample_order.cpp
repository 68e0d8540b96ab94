#include "data/sample_order.hpp"

#include <bit>

#include "tenax/error.hpp"

namespace tenax::data {
namespace {

// splitmix64's output function: a fast, well-mixing bijection of 64-bit words.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

SampleOrder::SampleOrder(std::uint64_t n, std::uint64_t seed, bool shuffle) : n_(n), seed_(seed), shuffle_(shuffle) {
  if (n == 0) throw UsageError("a sample order needs at least one sample");
  int bits = n == 1 ? 0 : std::bit_width(n - 1);
  if (bits < 2) bits = 2;
  half_bits_ = (bits + 1) / 2;
  half_mask_ = half_bits_ >= 64 ? ~0ull : (1ull << half_bits_) - 1;
}

std::uint64_t SampleOrder::permute(std::uint64_t epoch, std::uint64_t i) const {
  if (!shuffle_) return i;
  // Round keys for (seed, epoch): distinct seeds or epochs give unrelated keys.
  std::uint64_t keys[kRounds];
  std::uint64_t k = mix(seed_ ^ mix(epoch ^ 0x5851f42d4c957f2dull));
  for (int r = 0; r < kRounds; ++r) {
    k = mix(k + static_cast<std::uint64_t>(r));
    keys[r] = k;
  }
  std::uint64_t x = i;
  do {
    std::uint64_t left = x >> half_bits_;
    std::uint64_t right = x & half_mask_;
    for (int r = 0; r < kRounds; ++r) {
      const std::uint64_t f = mix(right ^ keys[r]) & half_mask_;
      const std::uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    x = (left << half_bits_) | right;
  } while (x >= n_);
  return x;
}

std::uint64_t SampleOrder::at(std::uint64_t position) const {
  return permute(position / n_, position % n_);
}

}  // namespace tenax::data
