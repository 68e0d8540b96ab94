// Synthetic training data: token sequences from a fixed random first-order Markov source, generated on the fly (for
// tests, benchmarks and examples that must not depend on a corpus).
//
// Each token has `branching` possible successors with fixed random probabilities, so the best achievable loss is the
// source's conditional entropy (about log(branching) nats), far below the log(vocab) of an untrained model: a falling
// loss shows real learning. Sample i of the stream is a pure function of (seed, i), so every rank can produce exactly
// the sequences it needs (data parallelism splits sample indices, the first pipeline stage needs the inputs and the
// last one the targets) and a run can resume at any sample: the data position is the whole data-loader state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tenax/batch_source.hpp"

namespace tenax {

class MarkovSource : public BatchSource {
 public:
  // Throws UsageError unless vocab >= 2 and 1 <= branching <= vocab.
  MarkovSource(std::size_t vocab, std::size_t branching, std::uint64_t seed);

  void fill(std::uint64_t first, std::size_t count, std::size_t seq_len, std::int32_t* out) const override;
  // Writes sample `index`: seq_len+1 tokens (inputs are [0, seq_len), targets [1, seq_len]).
  void sample(std::uint64_t index, std::size_t seq_len, std::int32_t* tokens) const;
  // The source's conditional entropy in nats (the loss floor), under its stationary distribution estimated by sampling.
  double entropy_rate() const;
  std::size_t vocab() const { return vocab_; }

 private:
  std::size_t vocab_, branching_;
  std::uint64_t seed_;
  std::vector<std::int32_t> successors_;  // [vocab, branching]
  std::vector<double> cumulative_;        // [vocab, branching], each row ends at 1
};

}  // namespace tenax
