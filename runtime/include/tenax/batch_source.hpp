// BatchSource: where the engine's training and validation samples come from (tenax/engine.hpp), and what a dataset
// implements to feed it: tenax::TokenDataset (tenax/token_dataset.hpp, real text from token shards) and
// tenax::MarkovSource (tenax/synthetic_data.hpp, synthetic) are both BatchSources.
//
// Sample k is seq_len + 1 consecutive tokens: the inputs, and shifted by one the targets. The engine asks for global
// sample positions: step i (0-based) on data-parallel rank r of D reads positions [i*G + r*G/D, i*G + (r+1)*G/D) for a
// global batch of G sequences, so the samples of a step depend on the step alone, never on the layout: a run resumed
// at step i in any layout reads exactly what the uninterrupted run would have read.
//
// Threads: fill() is called from the engine's data-loader threads, ahead of the step, several at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tenax {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Writes count x (seq_len + 1) tokens to out: the samples at positions first, first + 1, ... Must be a pure function
  // of the positions (seed any randomness with them) and safe to call from several threads at once. Throws UsageError
  // for a seq_len the source cannot serve, IoError for damaged data.
  virtual void fill(std::uint64_t first, std::size_t count, std::size_t seq_len, std::int32_t* out) const = 0;
  // What names the data this source serves (a dataset's identity and split), or "" when it cannot say. The engine
  // records it in its checkpoints and warns when a run resumes on other data: the sample position continues, but
  // over other samples.
  virtual std::string identity() const { return {}; }
  // How many different samples the source serves (positions past them serve them again: another epoch), or 0 when it
  // cannot say (or never repeats). A validation pass asked for more covers these once (rounded up to the global
  // batch), with a warning.
  virtual std::uint64_t distinct_samples() const { return 0; }
};

}  // namespace tenax
