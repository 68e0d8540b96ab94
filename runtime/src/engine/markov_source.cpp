#include "tenax/synthetic_data.hpp"

#include <cmath>

#include "tenax/error.hpp"

namespace tenax {

namespace {

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double unit(std::uint64_t bits) {
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}  // [0, 1)

}  // namespace

MarkovSource::MarkovSource(std::size_t vocab, std::size_t branching, std::uint64_t seed)
    : vocab_(vocab), branching_(branching), seed_(seed) {
  if (vocab < 2) throw UsageError("data: the vocabulary must hold at least 2 tokens");
  if (branching < 1 || branching > vocab) throw UsageError("data: the branching factor must be in [1, vocab]");
  successors_.resize(vocab * branching);
  cumulative_.resize(vocab * branching);
  for (std::size_t a = 0; a < vocab; ++a) {
    double total = 0;
    for (std::size_t k = 0; k < branching; ++k) {
      const std::uint64_t h = mix64(seed ^ mix64(a * 131 + k));
      successors_[a * branching + k] = static_cast<std::int32_t>(h % vocab);
      // Skewed weights (some successors much likelier) make the source more learnable than uniform branching.
      const double w = 0.1 + unit(mix64(h)) * unit(mix64(h + 1));
      total += w;
      cumulative_[a * branching + k] = total;
    }
    for (std::size_t k = 0; k < branching; ++k)
      cumulative_[a * branching + k] /= total;
    cumulative_[a * branching + branching - 1] = 1.0;
  }
}

void MarkovSource::sample(std::uint64_t index, std::size_t seq_len, std::int32_t* tokens) const {
  std::uint64_t state = mix64(seed_ ^ mix64(index ^ 0xD1B54A32D192ED03ull));
  tokens[0] = static_cast<std::int32_t>(state % vocab_);
  for (std::size_t t = 1; t <= seq_len; ++t) {
    state = mix64(state);
    const double u = unit(state);
    const auto a = static_cast<std::size_t>(tokens[t - 1]);
    std::size_t k = 0;
    while (k + 1 < branching_ && u >= cumulative_[a * branching_ + k])
      ++k;
    tokens[t] = successors_[a * branching_ + k];
  }
}

void MarkovSource::fill(std::uint64_t first, std::size_t count, std::size_t seq_len, std::int32_t* out) const {
  for (std::size_t i = 0; i < count; ++i)
    sample(first + i, seq_len, out + i * (seq_len + 1));
}

double MarkovSource::entropy_rate() const {
  // Token frequencies from a long sample approximate the stationary distribution.
  std::vector<double> freq(vocab_, 0.0);
  std::vector<std::int32_t> seq(4097);
  for (std::uint64_t s = 0; s < 16; ++s) {
    sample(~s, 4096, seq.data());
    for (std::size_t t = 0; t < 4096; ++t)
      freq[static_cast<std::size_t>(seq[t])] += 1.0 / (16 * 4096);
  }
  double h = 0;
  for (std::size_t a = 0; a < vocab_; ++a) {
    // Successors may repeat: merge their probabilities before taking the entropy.
    std::vector<double> p(vocab_, 0.0);
    double prev = 0;
    for (std::size_t k = 0; k < branching_; ++k) {
      p[static_cast<std::size_t>(successors_[a * branching_ + k])] += cumulative_[a * branching_ + k] - prev;
      prev = cumulative_[a * branching_ + k];
    }
    for (double q : p)
      if (q > 0) h -= freq[a] * q * std::log(q);
  }
  return h;
}

}  // namespace tenax
