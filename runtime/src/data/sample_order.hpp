// Internal: the order in which a TokenDataset serves its samples.
//
// Global position p falls in epoch e = p / n at offset i = p % n; the sample served there is perm_e(i), where perm_e
// is a pseudo-random permutation of [0, n) keyed by (seed, e). perm_e is a 6-round balanced Feistel network on the
// smallest even number of bits 2h >= bit_width(n - 1) (at least 2), with "cycle walking": apply the network until the
// value falls below n. The network is a bijection on [0, 2^2h), so walking from i < n ends at a distinct value below n
// for every i, and perm_e is a permutation. Since 2^2h < 4n, a walk takes fewer than 4 steps on average. State: the
// round keys (derived per call from seed and epoch with splitmix64); no table: O(1) memory, O(1) expected time.
#pragma once

#include <cstdint>

namespace tenax::data {

class SampleOrder {
 public:
  // n > 0 samples; shuffle false: the identity in every epoch (sample i at offset i).
  SampleOrder(std::uint64_t n, std::uint64_t seed, bool shuffle);

  std::uint64_t samples() const { return n_; }
  // The sample served at global position p (any p: epochs repeat with new keys).
  std::uint64_t at(std::uint64_t position) const;
  // The permutation of one epoch at offset i < n.
  std::uint64_t permute(std::uint64_t epoch, std::uint64_t i) const;

 private:
  static constexpr int kRounds = 6;
  std::uint64_t n_;
  std::uint64_t seed_;
  bool shuffle_;
  int half_bits_;
  std::uint64_t half_mask_;
};

}  // namespace tenax::data
