// Forward-only passes: the validation loss and text generation. Micro-batch after micro-batch, every virtual stage in
// model order, each activation handed to the next stage with one blocking transfer (a chain, so no schedule needed).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>

#include "comm/agreement.hpp"
#include "engine/engine_state.hpp"
#include "process/mpi_alive.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"
#include "tenax/worker.hpp"

namespace tenax {

void Engine::Impl::forward_only(const std::vector<std::int32_t>& samples, std::size_t sequences) {
  const int total_v = spec.total_virtual_stages(), stage = groups.coords.pp;
  const std::size_t seq = config.seq_len, per_mb = geometry.sequences;
  std::vector<std::int32_t> host_tokens;
  for (std::size_t first = 0; first < sequences; first += per_mb) {
    for (int vs = 0; vs < total_v; ++vs) {
      const int owner = spec.stage_of(vs);
      Chunk& chunk = chunk_of(vs);
      Slot& s = chunk.slots.front();  // outside a training step every slot is free
      if (owner == stage) {
        if (vs == 0) {
          host_tokens.resize(per_mb * seq);
          for (std::size_t j = 0; j < per_mb; ++j)
            std::memcpy(host_tokens.data() + j * seq, samples.data() + (first + j) * (seq + 1),
                        seq * sizeof(std::int32_t));
          ctx->upload(s.input.data(), host_tokens.data(), host_tokens.size() * sizeof(std::int32_t));
        } else if (spec.stage_of(vs - 1) == stage) {
          ctx->copy(s.input.data(), chunk_of(vs - 1).slots.front().output.data(), s.input.nbytes());
        } else {
          channel->exchange(
              {{false, spec.stage_of(vs - 1), s.input.as<float>(), static_cast<std::size_t>(s.input.numel())}});
        }
        if (vs == total_v - 1 && !state.logits_only) {
          host_tokens.resize(per_mb * seq);
          for (std::size_t j = 0; j < per_mb; ++j)
            std::memcpy(host_tokens.data() + j * seq, samples.data() + (first + j) * (seq + 1) + 1,
                        seq * sizeof(std::int32_t));
          ctx->upload(s.targets.data(), host_tokens.data(), host_tokens.size() * sizeof(std::int32_t));
        }
        chunk.module->forward(state, 0, s.input, s.output);
        if (vs < total_v - 1 && spec.stage_of(vs + 1) != stage)
          channel->exchange(
              {{true, spec.stage_of(vs + 1), s.output.as<float>(), static_cast<std::size_t>(s.output.numel())}});
      }
    }
  }
}

double Engine::evaluate(const BatchSource& source, std::uint64_t first, std::size_t samples) {
  detail::refuse_after_finalize("Engine::evaluate()");
  Impl& e = *impl_;
  const std::size_t dp = static_cast<std::size_t>(e.config.layout->dp);
  const std::size_t unit = e.geometry.sequences * dp;
  if (samples == 0 || samples % unit != 0)
    throw UsageError("evaluate: " + std::to_string(samples) + " samples do not split into micro-batches of " +
                     std::to_string(e.geometry.sequences) + " sequences on " + std::to_string(dp) +
                     " data-parallel ranks; use a multiple of " + std::to_string(unit));
  const std::size_t mine = samples / dp;
  // The samples are read a bounded part at a time (up to 16 Mi tokens, whole micro-batches): however many are asked
  // for, the memory stays that of one part.
  const std::size_t per_mb = e.geometry.sequences, seq = e.config.seq_len;
  const std::size_t part = std::max(per_mb, (std::size_t{16} << 20) / (seq + 1) / per_mb * per_mb);
  std::vector<std::int32_t> tokens;
  e.state.grad_scale = 0.0f;  // the loss's gradient is computed but unused
  e.state.logits_only = false;
  e.ctx->zero(e.loss_sum.data(), sizeof(double));
  for (std::size_t done = 0; done < mine;) {
    const std::size_t n = std::min(part, mine - done);
    if (e.holds_first || e.holds_last) {
      tokens.resize(n * (seq + 1));
      source.fill(first + static_cast<std::uint64_t>(e.groups.coords.dp) * mine + done, n, seq, tokens.data());
    }
    e.forward_only(tokens, n);
    done += n;
  }
  double loss = 0.0;
  if (e.holds_last && e.groups.coords.tp == 0) e.ctx->download(&loss, e.loss_sum.data(), sizeof loss);
  e.world.all_reduce(&loss, &loss, 1, DType::F64, ReduceOp::Sum);
  return loss / (static_cast<double>(samples) * static_cast<double>(e.config.seq_len));
}

void Engine::check_generation(std::size_t tokens, float temperature) {
  if (!(temperature >= 0.0f && std::isfinite(temperature)))
    throw UsageError("generate: the temperature " + std::to_string(temperature) +
                     " is not a finite number >= 0 (0: greedy)");
  // Each token is a forward pass of the whole model over a full context: a bound keeps a mistyped count from
  // occupying the job for days.
  constexpr std::size_t kMaxTokens = std::size_t{1} << 20;
  if (tokens > kMaxTokens)
    throw UsageError("generate: " + std::to_string(tokens) + " tokens asked; at most " + std::to_string(kMaxTokens) +
                     " (each one is a forward pass of the model)");
}

std::vector<std::int32_t> Engine::generate(std::vector<std::int32_t> prompt, std::size_t tokens, float temperature,
                                           std::uint64_t seed) {
  detail::refuse_after_finalize("Engine::generate()");
  Impl& e = *impl_;
  run_agreed(e.world, [&] {
    if (prompt.empty()) throw UsageError("generate: the prompt is empty; give at least one token");
    check_generation(tokens, temperature);
  });
  // A collective: ranks asking for different generations would wait for each other until the communication timeout.
  std::uint32_t temperature_bits = 0;  // -0 and 0 both mean greedy
  if (temperature != 0.0f) std::memcpy(&temperature_bits, &temperature, sizeof temperature_bits);
  std::uint64_t prompt_hash = 14695981039346656037ull;  // FNV-1a over the ids
  for (const std::int32_t id : prompt)
    prompt_hash = (prompt_hash ^ static_cast<std::uint32_t>(id)) * 1099511628211ull;
  const std::array<std::int64_t, 5> asked = {
      static_cast<std::int64_t>(tokens), static_cast<std::int64_t>(temperature_bits), static_cast<std::int64_t>(seed),
      static_cast<std::int64_t>(prompt.size()), static_cast<std::int64_t>(prompt_hash)};
  std::array<std::int64_t, 5> low = asked, high = asked;
  e.world.all_reduce(low.data(), low.data(), low.size(), DType::I64, ReduceOp::Min);
  e.world.all_reduce(high.data(), high.data(), high.size(), DType::I64, ReduceOp::Max);
  if (low != high)
    throw UsageError(
        "generate: the ranks were given different arguments (the prompt, the number of tokens, the temperature or "
        "the seed); generate() is collective: call it on every rank with the same ones");
  const std::size_t seq = e.config.seq_len, per_mb = e.geometry.sequences;
  // The last stage's tp rank 0 of data-parallel replica 0 picks each token and tells everyone.
  const int chooser = rank_of(*e.config.layout, RankCoords{0, e.config.layout->pp - 1, 0});
  std::mt19937_64 rng(seed);
  e.state.logits_only = true;
  for (std::size_t n = 0; n < tokens; ++n) {
    // A job being stopped (SIGTERM, SIGUSR1) stops generating, on every rank at the same token, and keeps what it has.
    if (any_rank(e.world, worker::preemption_requested())) {
      if (e.world.rank() == 0)
        TENAX_LOG(Warn, "engine") << "generation stopped after " << n << " of " << tokens
                                  << " tokens: the job is being stopped";
      break;
    }
    // The context: the last seq_len tokens, at positions 0.. (a causal model's logits at position p depend only on
    // tokens up to p, so the filler after the context does not matter).
    const std::size_t length = std::min(prompt.size(), seq);
    std::vector<std::int32_t> samples(per_mb * (seq + 1), 0);
    std::copy(prompt.end() - static_cast<std::ptrdiff_t>(length), prompt.end(), samples.begin());
    e.state.logits = Tensor();
    e.forward_only(samples, per_mb);
    std::int32_t next = 0;
    if (e.world.rank() == chooser) {
      const Tensor& logits = e.state.logits;
      const std::size_t vocab = static_cast<std::size_t>(logits.dim(1));
      const float* row = logits.as<float>() + (length - 1) * vocab;
      if (temperature == 0.0f) {
        next = static_cast<std::int32_t>(std::max_element(row, row + vocab) - row);
      } else {
        const float top = *std::max_element(row, row + vocab);
        std::vector<double> weights(vocab);
        for (std::size_t v = 0; v < vocab; ++v)
          weights[v] = std::exp(static_cast<double>((row[v] - top) / temperature));
        next = static_cast<std::int32_t>(std::discrete_distribution<std::size_t>(weights.begin(), weights.end())(rng));
      }
    }
    e.world.broadcast(&next, 1, DType::I32, chooser);
    prompt.push_back(next);
  }
  e.state.logits_only = false;
  e.state.logits = Tensor();
  return prompt;
}

}  // namespace tenax
