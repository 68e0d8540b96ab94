// Ready-made models for the engine (tenax/engine.hpp), composed of the library's modules (tenax/nn.hpp): each returns
// the ChunkBuilder that builds a pipeline chunk's share of the model, so a program (or a test, or a benchmark) trains
// one with the same few lines whatever the layout.
#pragma once

#include <cstddef>
#include <string>

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

// A GPT-2-style decoder: token (vocabulary-parallel) and learned position embeddings, pre-LayerNorm blocks of causal
// multi-head self-attention and a 4x GeLU MLP (nn::transformer_block), a final LayerNorm and the vocabulary-parallel
// output head with cross-entropy, optionally tied to the token embedding. Megatron placement under tensor parallelism
// (embedding and head split by vocabulary, QKV column-parallel split by heads, attention output and fc2 row-parallel),
// blocks spread over pipeline chunks. Parameter names: "wte.weight", "wpe.weight", "h.<i>.ln_1", "h.<i>.attn.qkv",
// "h.<i>.attn.proj", "h.<i>.ln_2", "h.<i>.mlp.fc1", "h.<i>.mlp.fc2", "ln_f", and "lm_head.weight" unless tied.
struct GptConfig {
  std::size_t vocab = 8000;
  std::size_t hidden = 256;
  std::size_t layers = 4;
  std::size_t heads = 4;
  std::size_t max_positions = 1024;  // the longest sequence the position table covers
  float init_std = 0.02f;
  bool recompute_attention = false;  // recompute the attention probabilities in backward instead of storing them
  // The output head uses the token embedding's table (GPT-2's tied embeddings): one vocab x hidden matrix fewer. Under
  // pipeline parallelism the first and the last stage each hold a copy and the engine sums their gradients.
  bool tie_embeddings = false;
  // The number of parameters of the whole model (all ranks together).
  std::size_t parameters() const;
  // What the weights mean, for EngineConfig::model_description: every field but init_std and recompute_attention
  // (neither changes what a saved weight means).
  std::string description() const;
};
ChunkBuilder gpt(const GptConfig& config);

}  // namespace tenax::models
