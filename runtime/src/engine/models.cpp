#include "tenax/models.hpp"

#include <cmath>

#include "tenax/nn.hpp"

namespace tenax::models {

ChunkBuilder mlp_lm(const MlpLmConfig& config) {
  return [config](const ChunkContext& chunk) -> std::unique_ptr<nn::Module> {
    Communicator& tp = *chunk.tp;
    const std::size_t h = config.hidden, f = config.ffn();
    const float fc1_std = 1.0f / std::sqrt(static_cast<float>(h));
    // GPT-2's residual scaling: projections into the residual stream shrink with depth so the stream stays O(1).
    const float fc2_std = 1.0f / std::sqrt(static_cast<float>(f) * 2.0f * static_cast<float>(config.layers));
    std::vector<std::unique_ptr<nn::Module>> m;
    if (chunk.first()) m.push_back(std::make_unique<nn::Embedding>("embedding", config.vocab, h, 1.0f));
    const auto [first, end] = chunk.blocks(config.layers);
    for (std::size_t b = first; b < end; ++b) {
      const std::string name = "blocks." + std::to_string(b);
      std::vector<std::unique_ptr<nn::Module>> inner;
      inner.push_back(std::make_unique<nn::LayerNorm>(name + ".ln", h));
      inner.push_back(std::make_unique<nn::GeluMlp>(name + ".mlp", h, f, tp, fc1_std, fc2_std));
      m.push_back(std::make_unique<nn::Residual>(std::make_unique<nn::Sequential>(name, std::move(inner))));
    }
    if (chunk.last()) {
      m.push_back(std::make_unique<nn::LayerNorm>("final_ln", h));
      m.push_back(std::make_unique<nn::VocabParallelLoss>("output", h, config.vocab, tp,
                                                          1.0f / std::sqrt(static_cast<float>(h))));
    }
    return std::make_unique<nn::Sequential>("chunk" + std::to_string(chunk.virtual_stage), std::move(m));
  };
}

std::size_t GptConfig::parameters() const {
  const std::size_t h = hidden;
  const std::size_t block = 2 * 2 * h + (3 * h * h + 3 * h) + (h * h + h) + (4 * h * h + 4 * h) + (4 * h * h + h);
  return vocab * h + max_positions * h + layers * block + 2 * h + (tie_embeddings ? 0 : vocab * h);
}

std::string GptConfig::description() const {
  return "gpt vocab=" + std::to_string(vocab) + " hidden=" + std::to_string(hidden) +
         " layers=" + std::to_string(layers) + " heads=" + std::to_string(heads) +
         " max_positions=" + std::to_string(max_positions) + " tie_embeddings=" + (tie_embeddings ? "1" : "0");
}

ChunkBuilder gpt(const GptConfig& config) {
  return [config](const ChunkContext& chunk) -> std::unique_ptr<nn::Module> {
    Communicator& tp = *chunk.tp;
    const std::size_t h = config.hidden;
    std::vector<std::unique_ptr<nn::Module>> m;
    if (chunk.first()) {
      m.push_back(std::make_unique<nn::VocabParallelEmbedding>("wte", config.vocab, h, tp, config.init_std));
      m.push_back(std::make_unique<nn::PositionalEmbedding>("wpe", config.max_positions, h, config.init_std / 2));
    }
    // The head's product costs vocab x hidden multiply-adds per token against a block's 12 hidden^2 (its four
    // products; the attention core aside): the last stage's extra work in blocks, so that it gets fewer of them.
    const double head_in_blocks = static_cast<double>(config.vocab) / (12.0 * static_cast<double>(h));
    const auto [first, end] = chunk.blocks(config.layers, head_in_blocks);
    for (std::size_t b = first; b < end; ++b)
      m.push_back(nn::transformer_block("h." + std::to_string(b), h, config.heads, config.layers, tp, config.init_std,
                                        config.recompute_attention));
    if (chunk.last()) {
      m.push_back(std::make_unique<nn::LayerNorm>("ln_f", h));
      m.push_back(std::make_unique<nn::VocabParallelLoss>("lm_head", h, config.vocab, tp, config.init_std,
                                                          config.tie_embeddings ? "wte.weight" : ""));
    }
    return std::make_unique<nn::Sequential>("chunk" + std::to_string(chunk.virtual_stage), std::move(m));
  };
}

}  // namespace tenax::models
