#include "engine/config_agreement.hpp"

#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "tenax/error.hpp"

namespace tenax::detail {
namespace {

// FNV-1a: a field's text as one integer, so that every rank sends a fixed few bytes per field. A collision between
// two different values (2^-64) would only let a mismatch pass, as before this check.
std::int64_t digest(const std::string& text) {
  std::uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return static_cast<std::int64_t>(h);
}

std::string exact(double value) {  // hexadecimal: every bit of the value, NaN and infinities included
  char text[64];
  std::snprintf(text, sizeof text, "%a", value);
  return text;
}

std::vector<std::pair<const char*, std::string>> fields(const EngineConfig& c) {
  auto n = [](auto value) { return std::to_string(value); };
  const OptimizerConfig& o = c.optimizer;
  const CheckpointPolicy& k = c.checkpoint;
  return {
      {"layout", c.layout ? c.layout->to_string() : "unset"},
      {"schedule", n(static_cast<int>(c.schedule))},
      {"virtual_stages", n(c.virtual_stages)},
      {"precision", std::string(c.precision.name())},
      {"device", n(static_cast<int>(c.device))},
      {"global_batch", n(c.global_batch)},
      {"micro_batch", n(c.micro_batch)},
      {"seq_len", n(c.seq_len)},
      {"seed", n(c.seed)},
      {"steps", n(c.steps)},
      {"optimizer.kind", n(static_cast<int>(o.kind))},
      {"optimizer.adamw", exact(o.adamw.lr) + exact(o.adamw.beta1) + exact(o.adamw.beta2) + exact(o.adamw.eps) +
                              exact(o.adamw.weight_decay)},
      {"optimizer.sgd",
       exact(o.sgd.lr) + exact(o.sgd.momentum) + exact(o.sgd.weight_decay) + n(o.sgd.nesterov ? 1 : 0)},
      {"lr", exact(c.lr.lr) + exact(c.lr.min_lr) + n(c.lr.warmup_steps) + "/" + n(c.lr.decay_steps)},
      {"grad_clip", exact(c.grad_clip)},
      {"loss_scaler", exact(c.loss_scaler.initial_scale) + exact(c.loss_scaler.growth_factor) +
                          exact(c.loss_scaler.backoff_factor) + exact(c.loss_scaler.min_scale) + "/" +
                          n(c.loss_scaler.growth_interval) + "/" + n(c.loss_scaler.hysteresis)},
      {"data_parallel", n(c.data_parallel.bucket_bytes) + "/" + n(c.data_parallel.zero1 ? 1 : 0)},
      {"checkpoint.dir", k.dir},
      {"checkpoint.every", n(k.every) + "/" + n(k.automatic ? 1 : 0) + "/" + exact(k.mtbf_s)},
      {"checkpoint.keep", n(k.keep)},
      {"checkpoint.local_dir", k.local_dir},
      {"checkpoint.local_every", n(k.local_every) + "/" + n(k.local_automatic ? 1 : 0)},
      {"checkpoint.max_failures", n(k.max_failures)},
      {"validation", n(c.validation.source ? 1 : 0) + "/" + n(c.validation.every) + "/" + n(c.validation.samples)},
  };
}

}  // namespace

void check_config_agrees(Communicator& world, const EngineConfig& config) {
  const auto mine = fields(config);
  std::vector<std::int64_t> digests;
  for (const auto& field : mine)
    digests.push_back(digest(field.second));
  const auto count = digests.size();
  std::vector<std::int64_t> all(count * static_cast<std::size_t>(world.size()));
  world.all_gather(digests.data(), all.data(), count, DType::I64);
  std::string differing;
  for (std::size_t f = 0; f < count; ++f)
    for (int r = 1; r < world.size(); ++r)
      if (all[static_cast<std::size_t>(r) * count + f] != all[f]) {
        differing +=
            std::string(differing.empty() ? "" : ", ") + mine[f].first + " (rank 0 and rank " + std::to_string(r) + ")";
        break;
      }
  if (!differing.empty())
    throw UsageError("engine: the ranks were given different configurations: EngineConfig " + differing +
                     " differ. Every rank must be given the same settings (the same command line, configuration "
                     "file and TENAX_* environment, e.g. TENAX_LAYOUT)");
}

void check_group_models_agree(Communicator& group, ModelGroup kind, const std::string& parameters) {
  const std::int64_t mine = digest(parameters);
  std::vector<std::int64_t> all(static_cast<std::size_t>(group.size()));
  group.all_gather(&mine, all.data(), 1, DType::I64);
  const bool dp = kind == ModelGroup::DataParallel;
  for (int r = 1; r < group.size(); ++r)
    if (all[static_cast<std::size_t>(r)] != all[0])
      throw UsageError(std::string("engine: ") + (dp ? "data" : "tensor") + "-parallel ranks 0 and " +
                       std::to_string(r) + " of this " + (dp ? "replica" : "tensor-parallel") +
                       " group built different models (their parameters' names, shapes, splits or initialisation "
                       "differ): every rank must build the same model from the same options");
}

}  // namespace tenax::detail
