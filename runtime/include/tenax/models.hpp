// Ready-made models for the engine (tenax/engine.hpp), composed of the library's modules (tenax/nn.hpp): each returns
// the ChunkBuilder that builds a pipeline chunk's share of the model, so a program (or a test, or a benchmark) trains
// one with the same few lines whatever the layout.
#pragma once

#include <cstddef>

#include "tenax/engine.hpp"

namespace tenax::models {

// A language model of residual MLP blocks (no attention, no positions: a bigram-like model that trains in seconds):
//   tokens -> embedding -> blocks x + mlp(layernorm(x)) -> layernorm -> vocabulary-parallel cross-entropy
// Parameter names: "embedding.weight", "blocks.<i>.ln.{gain,bias}", "blocks.<i>.mlp.fc1.{weight,bias}",
// "blocks.<i>.mlp.fc2.{weight,bias}", "final_ln.{gain,bias}", "output.weight".
struct MlpLmConfig {
  std::size_t vocab = 256;
  std::size_t hidden = 128;
  std::size_t layers = 4;
  std::size_t ffn() const { return 4 * hidden; }
};
ChunkBuilder mlp_lm(const MlpLmConfig& config);

}  // namespace tenax::models
