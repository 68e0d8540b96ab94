// The engine's construction: the layout and its groups, the model chunks with their activation slots, the parameter
// buffers, the optimizer and the pipeline channel.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "checkpoint/names.hpp"
#include "comm/agreement.hpp"
#include "comm/node_local.hpp"
#include "engine/config_agreement.hpp"
#include "engine/device_setup.hpp"
#include "engine/engine_state.hpp"
#include "engine/memory_limit.hpp"
#include "process/mpi_alive.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/kernels/blas_core.hpp"
#include "tenax/log.hpp"

namespace tenax {

std::pair<std::size_t, std::size_t> ChunkContext::blocks(std::size_t total, double last_chunk_extra) const {
  const auto n = static_cast<std::size_t>(virtual_stages), v = static_cast<std::size_t>(virtual_stage);
  if (total < n)
    throw UsageError("model: " + std::to_string(total) + " blocks cannot be spread over " + std::to_string(n) +
                     " model chunks (pipeline stages x virtual stages): every chunk needs at least one block; use "
                     "fewer stages or more blocks");
  // Evenly, earlier chunks taking the extra ones: chunk v holds [first, first + count).
  auto even = [](std::size_t blocks, std::size_t chunks, std::size_t chunk) {
    const std::size_t base = blocks / chunks, extra = blocks % chunks;
    const std::size_t first = chunk * base + std::min(chunk, extra);
    return std::pair<std::size_t, std::size_t>{first, first + base + (chunk < extra ? 1 : 0)};
  };
  if (!(last_chunk_extra > 0.0) || n == 1) return even(total, n, v);
  // The last chunk's own work (the output head, the loss) counts as last_chunk_extra blocks: give it the number of
  // blocks L that makes the slowest chunk fastest, the others sharing the rest evenly; of equally good choices, the
  // one that moves the fewest blocks off the last chunk.
  std::size_t best = 1;
  double best_cost = 0;
  for (std::size_t last = 1; last + (n - 1) <= total; ++last) {
    const std::size_t rest = total - last;
    const double cost =
        std::max(static_cast<double>(last) + last_chunk_extra, static_cast<double>((rest + n - 2) / (n - 1)));
    if (last == 1 || cost <= best_cost) {
      best = last;
      best_cost = cost;
    }
  }
  if (v == n - 1) return {total - best, total};
  return even(total - best, n - 1, v);
}

float LearningRateSchedule::at(long step) const {
  if (warmup_steps > 0 && step <= warmup_steps) return lr * static_cast<float>(step) / static_cast<float>(warmup_steps);
  if (decay_steps <= 0) return lr;
  const double t = std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  const double pi = 3.14159265358979323846;
  return min_lr + static_cast<float>(0.5 * (1.0 + std::cos(pi * t)) * (lr - min_lr));
}

Engine::Impl::Impl(Communicator& w, EngineConfig c, std::shared_ptr<const BatchSource> source)
    : world(w), config(std::move(c)), data(std::move(source)) {
  const metrics::Options options = metrics::Options::from_env();
  op_profile_first = options.op_profile_first;
  op_profile_end = options.op_profile_end;
}

void Engine::Impl::resolve_layout() {
  const int n = world.size();
  ParallelLayout layout;
  if (config.layout) {
    layout = *config.layout;
  } else if (env::is_set("TENAX_LAYOUT") && !env::get_string("TENAX_LAYOUT").empty()) {
    const std::string text = env::get_string("TENAX_LAYOUT");
    layout = ParallelLayout::parse(text);
    // "tp=2,pp=2" leaves data parallelism to the world size (as the plugin and tenax-launch document).
    if (text.find("dp") == std::string::npos && text.find('x') == std::string::npos)
      layout = ParallelLayout::infer(n, layout.tp, layout.pp);
  } else {
    layout = ParallelLayout{1, 1, n};
  }
  layout.validate(n);
  config.layout = layout;
  if (!data) throw UsageError("engine: no batch source was given");
  if (config.seq_len < 1 || config.seq_len > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw UsageError("engine: seq_len must be >= 1 and at most 2147483647 tokens, not " +
                     std::to_string(config.seq_len) + " (EngineConfig::seq_len, the examples' --seq-len)");
  if (config.global_batch < 1 || config.micro_batch < 1)
    throw UsageError("engine: the global batch and the micro-batch must be >= 1 sequences");
  if (config.global_batch % layout.dp != 0)
    throw UsageError("engine: the global batch of " + std::to_string(config.global_batch) +
                     " sequences does not split evenly over " + std::to_string(layout.dp) +
                     " data-parallel ranks; use a batch that is a multiple of dp=" + std::to_string(layout.dp));
  const int per_rank = config.global_batch / layout.dp;
  if (per_rank % config.micro_batch != 0)
    throw UsageError("engine: the micro-batch of " + std::to_string(config.micro_batch) +
                     " sequences does not divide the " + std::to_string(per_rank) +
                     " sequences each data-parallel rank gets per step (batch " + std::to_string(config.global_batch) +
                     " / dp " + std::to_string(layout.dp) + "); use a micro-batch that divides " +
                     std::to_string(per_rank));
  if (config.steps < 0) throw UsageError("engine: steps must be >= 0");
  if (!(config.grad_clip >= 0.0f)) throw UsageError("engine: grad_clip must be >= 0 (0: no clipping)");
  // A negative rate or decay climbs the loss instead of descending it; nothing would say so but the curve.
  auto finite_at_least_0 = [](float value) { return std::isfinite(value) && value >= 0.0f; };
  if (!finite_at_least_0(config.lr.lr) || !finite_at_least_0(config.lr.min_lr))
    throw UsageError("engine: the learning rate must be a finite number >= 0 (lr " + std::to_string(config.lr.lr) +
                     ", min_lr " + std::to_string(config.lr.min_lr) + ")");
  if (config.lr.min_lr > config.lr.lr)
    throw UsageError("engine: min_lr " + std::to_string(config.lr.min_lr) + " is above the peak learning rate " +
                     std::to_string(config.lr.lr) + ": the decay would raise the rate; give min_lr <= lr");
  if (config.lr.warmup_steps < 0 || config.lr.decay_steps < 0)
    throw UsageError("engine: the learning rate's warm-up and decay steps must be >= 0 (warm-up " +
                     std::to_string(config.lr.warmup_steps) + ", decay " + std::to_string(config.lr.decay_steps) + ")");
  if (!finite_at_least_0(config.optimizer.adamw.weight_decay) || !finite_at_least_0(config.optimizer.sgd.weight_decay))
    throw UsageError("engine: the weight decay must be a finite number >= 0");
  if (config.checkpoint.keep < 0)
    throw UsageError("checkpoint: keep must be >= 0 (complete checkpoints kept; 0: TENAX_CKPT_KEEP)");
  if (config.validation.source) {
    if (config.validation.every < 0)
      throw UsageError("engine: validation every " + std::to_string(config.validation.every) +
                       " steps; use >= 1, or 0 for only after the last step");
    if (config.validation.samples == 0)
      throw UsageError("engine: validation needs samples >= 1 (it is rounded up to a multiple of the global batch)");
    const auto batch = static_cast<std::size_t>(config.global_batch);
    if (config.validation.samples > (std::size_t{1} << 40))
      throw UsageError("engine: " + std::to_string(config.validation.samples) +
                       " validation samples is not a sensible pass; use fewer");
    // More samples than the source holds would only repeat them (a typo of 100000000 ran for hours): the pass
    // covers each once. A small split with the default count is no mistake, so this is said, not refused.
    if (const std::uint64_t distinct = config.validation.source->distinct_samples();
        distinct > 0 && config.validation.samples > distinct) {
      if (world.rank() == 0)
        TENAX_LOG(Warn, "engine") << "validation: " << config.validation.samples
                                  << " samples asked for, but its source "
                                  << "holds " << distinct << " different ones; each pass covers those " << distinct;
      config.validation.samples = static_cast<std::size_t>(distinct);
    }
    config.validation.samples = (config.validation.samples + batch - 1) / batch * batch;
  }
  config.data_parallel.validate();
  config.loss_scaler.validate();
  sequences_per_rank = static_cast<std::size_t>(per_rank);
  micro_batches = per_rank / config.micro_batch;
  geometry = {static_cast<std::size_t>(config.micro_batch), config.seq_len};
  spec = PipelineSpec{config.schedule, layout.pp, config.virtual_stages, micro_batches};
  spec.validate();
}

void Engine::Impl::make_groups() {
  groups = ProcessGroups::create(world, *config.layout);
  if (config.device == Device::Cuda) {
    device_context = detail::make_cuda_context(world);
    ctx = device_context.get();
    // One NCCL world, split into the same groups as the MPI ones (ncclCommSplit: no extra unique-id exchange).
    nccl_world = make_nccl_communicator(world, ctx->device_index(), "world.nccl");
    nccl_groups = ProcessGroups::create(*nccl_world, groups.layout);
    compute = &nccl_groups;
  }
  program = pipeline_program(spec, groups.coords.pp);
}

namespace {

// A TensorSpec through the pipeline group: [dtype, rank, dims...].
std::vector<std::int64_t> encode(const nn::TensorSpec& s) {
  std::vector<std::int64_t> out{static_cast<std::int64_t>(s.dtype), static_cast<std::int64_t>(s.shape.size())};
  out.insert(out.end(), s.shape.begin(), s.shape.end());
  out.resize(10, 0);
  return out;
}
nn::TensorSpec decode(const std::vector<std::int64_t>& v) {
  nn::TensorSpec s;
  s.dtype = static_cast<DType>(v[0]);
  s.shape.assign(v.begin() + 2, v.begin() + 2 + v[1]);
  return s;
}

}  // namespace

void Engine::Impl::build_chunks(const ChunkBuilder& build) {
  const int pp = spec.stages, stage = groups.coords.pp, total = spec.total_virtual_stages();
  holds_first = stage == 0;
  holds_last = spec.stage_of(total - 1) == stage;
  chunks.resize(static_cast<std::size_t>(spec.virtual_stages));
  run_agreed(world, [&] {
    if (!build)
      throw UsageError("engine: the model builder (ChunkBuilder) is empty; pass a function that builds a chunk");
    for (int c = 0; c < spec.virtual_stages; ++c) {
      Chunk& chunk = chunks[static_cast<std::size_t>(c)];
      chunk.virtual_stage = c * pp + stage;
      ChunkContext context{chunk.virtual_stage, total, *config.layout, compute->tp.get()};
      chunk.module = build(context);
      if (!chunk.module)
        throw UsageError("engine: the model builder returned no module for virtual stage " +
                         std::to_string(chunk.virtual_stage));
    }
  });
  // Prepare in model order: each chunk's input is the previous chunk's output, which its owner learns first.
  const auto rows = static_cast<std::int64_t>(geometry.rows());
  nn::TensorSpec incoming{{rows}, DType::I32};
  for (int vs = 0; vs < total; ++vs) {
    const int owner = spec.stage_of(vs);
    run_agreed(world, [&] {
      if (owner != stage) return;
      Chunk& chunk = chunks[static_cast<std::size_t>(spec.chunk_of(vs))];
      const int slots = std::max(1, activation_slots(program, spec, spec.chunk_of(vs)));
      chunk.input = incoming;
      chunk.output = chunk.module->prepare(incoming, geometry, slots, *ctx);
      const bool last = vs == total - 1;
      if (last && shape_numel(chunk.output.shape) != 0)
        throw UsageError(
            "engine: the last model chunk must end in a loss module (e.g. nn::VocabParallelLoss), but it "
            "outputs " +
            nn::to_string(chunk.output));
      if (!last &&
          (chunk.output.dtype != DType::F32 || chunk.output.shape.size() != 2 || chunk.output.shape[0] != rows))
        throw UsageError(
            "engine: model chunk " + std::to_string(vs) + " outputs " + nn::to_string(chunk.output) +
            "; activations between pipeline stages are f32 [rows, features] with rows = " + std::to_string(rows));
      if (chunk.output.shape.size() > 8) throw UsageError("engine: an output of more than 8 dimensions");
      if (vs > 0) chunk.input_grad = ctx->zeros(chunk.input.shape, DType::F32);
      for (int s = 0; s < slots; ++s) {
        Slot slot;
        slot.input = ctx->zeros(chunk.input.shape, chunk.input.dtype);
        if (!last) slot.output = ctx->zeros(chunk.output.shape, chunk.output.dtype);
        if (!last) slot.output_grad = ctx->zeros(chunk.output.shape, DType::F32);
        if (last) slot.targets = ctx->zeros({rows}, DType::I32);
        chunk.slots.push_back(std::move(slot));
        chunk.free_slots.push_back(slots - 1 - s);
      }
    });
    std::vector<std::int64_t> wire = owner == stage ? encode(chunks[static_cast<std::size_t>(spec.chunk_of(vs))].output)
                                                    : std::vector<std::int64_t>(10, 0);
    groups.pp->broadcast(wire.data(), wire.size(), DType::I64, owner);
    incoming = decode(wire);
  }
}

namespace {

// Every rank's text over `comm`, in rank order: the lengths first, then the bytes padded to the longest.
std::vector<std::string> all_gather_text(Communicator& comm, const std::string& mine) {
  const auto ranks = static_cast<std::size_t>(comm.size());
  std::int64_t length = static_cast<std::int64_t>(mine.size());
  std::vector<std::int64_t> lengths(ranks);
  comm.all_gather(&length, lengths.data(), 1, DType::I64);
  const auto longest =
      static_cast<std::size_t>(std::max<std::int64_t>(1, *std::max_element(lengths.begin(), lengths.end())));
  std::string padded = mine;
  padded.resize(longest, '\0');
  std::vector<char> all(longest * ranks);
  comm.all_gather(padded.data(), all.data(), longest, DType::U8);
  std::vector<std::string> out;
  for (std::size_t r = 0; r < ranks; ++r)
    out.emplace_back(all.data() + r * longest, static_cast<std::size_t>(lengths[r]));
  return out;
}

// What must agree between the copies of a tied parameter on different stages: the global tensor, this rank's block
// of it, its tensor-parallel split and its initialisation.
std::string signature(const ParameterSpec& p, bool with_offset) {
  std::string out;
  const Shape none;
  for (const Shape* s : {&p.global_shape, with_offset ? &p.offset : &none, &p.shape}) {
    for (std::int64_t d : *s)
      out += std::to_string(d) + ",";
    out += ";";
  }
  char init[64];
  std::snprintf(init, sizeof init, "%d;%d;%.9g", p.tp_sharded ? 1 : 0, static_cast<int>(p.init),
                static_cast<double>(p.init_std));
  return out + init;
}

// The stages' declarations of one name agree with a tie: the same tensor everywhere, borrowed somewhere (which is how
// a model says the sharing is meant), owned somewhere (else nobody defines it).
struct Declarations {
  std::vector<int> stages;
  std::string signature;
  bool borrowed = false, owned = false;
};

// (name, signature, "b"orrowed or "o"wned) triples as "<length>:<text>" fields one after another (a name may hold any
// character).
// Without offsets: what the ranks of a tensor-parallel group, which hold different blocks, must share.
std::string encode_specs(const std::vector<ParameterSpec>& specs, bool with_offsets = true) {
  std::string out;
  for (const ParameterSpec& p : specs)
    for (const std::string& field : {p.name, signature(p, with_offsets), std::string(p.borrowed ? "b" : "o")})
      out += std::to_string(field.size()) + ":" + field;
  return out;
}
std::vector<std::array<std::string, 3>> decode_specs(const std::string& text) {
  std::vector<std::string> fields;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t colon = text.find(':', at);
    const std::size_t length = std::stoull(text.substr(at, colon - at));
    fields.push_back(text.substr(colon + 1, length));
    at = colon + 1 + length;
  }
  std::vector<std::array<std::string, 3>> out;
  for (std::size_t i = 0; i + 2 < fields.size(); i += 3)
    out.push_back({fields[i], fields[i + 1], fields[i + 2]});
  return out;
}

}  // namespace

// A parameter that several pipeline stages declare is tied across them: each stage keeps a copy, the lowest stage's is
// the canonical one (checkpoints, checksums and the gradient norm count it alone), and each step the copies'
// gradients are summed over the stages holding them before the data-parallel reduction (both sums are linear, so
// their order does not matter), which keeps the copies equal: every copy then takes the same optimizer update.
void Engine::Impl::find_tied_parameters(std::vector<ParameterSpec>& specs,
                                        const std::map<std::string, int>& local_users) {
  // One rank per stage in the pipeline group, all with this rank's tp and dp coordinates: every pipeline group sees
  // the same names per stage, so every rank finds the same sets below, in the same order.
  const std::vector<std::string> per_stage = all_gather_text(*groups.pp, encode_specs(specs));
  std::map<std::string, Declarations> declared;  // name order
  for (std::size_t s = 0; s < per_stage.size(); ++s)
    for (const auto& [name, sig, kind] : decode_specs(per_stage[s])) {
      Declarations& d = declared[name];
      d.stages.push_back(static_cast<int>(s));
      (kind == "b" ? d.borrowed : d.owned) = true;
      // Every rank of the group sees the same gathered text, so all of them refuse together.
      if (d.stages.size() > 1 && d.signature != sig)
        throw UsageError("engine: pipeline stages " + std::to_string(d.stages.front()) + " and " + std::to_string(s) +
                         " declare parameter '" + name +
                         "' with different shapes, splits or initialisation; a tied weight must be the same tensor");
      d.signature = sig;
    }
  std::map<std::string, std::vector<int>> holders;  // name -> stages declaring it, ascending
  for (const auto& [name, d] : declared) {
    if (d.stages.size() > 1 && !d.borrowed)
      throw UsageError("engine: pipeline stages " + std::to_string(d.stages.front()) + " and " +
                       std::to_string(d.stages[1]) + " both declare a parameter named '" + name +
                       "'; every parameter needs its own name (a module that uses another's weight declares it "
                       "borrowed, as nn::VocabParallelLoss does for a tied embedding)");
    if (!d.owned)
      throw UsageError("engine: parameter '" + name +
                       "' is borrowed but no module declares it as its own; add the module that owns it");
    holders[name] = d.stages;
  }
  std::vector<std::vector<int>> sets;
  std::map<std::vector<int>, std::vector<std::string>> names_of_set;
  for (const auto& [name, stages] : holders) {
    if (stages.size() < 2) continue;
    if (std::find(sets.begin(), sets.end(), stages) == sets.end()) sets.push_back(stages);
    names_of_set[stages].push_back(name);
  }
  const int stage = groups.coords.pp;
  for (ParameterSpec& p : specs) {
    const std::vector<int>& stages = holders.at(p.name);
    p.stage_replica = stages.size() > 1 && stages.front() != stage;
  }
  tied.clear();
  for (const std::vector<int>& set : sets) {
    const bool member = std::find(set.begin(), set.end(), stage) != set.end();
    // Collective over the pipeline group: every stage takes part, the ones outside the set get no communicator.
    std::unique_ptr<Communicator> comm = compute->pp->split(member ? 0 : -1, stage, "tied");
    if (member) tied.push_back({std::move(comm), names_of_set.at(set), {}});
  }
  tied_local_names.clear();
  for (const auto& [name, users] : local_users)
    if (users > 1) tied_local_names.push_back(name);
}

void Engine::Impl::make_state() {
  // Gradients become final chunk by chunk, last chunk first, and within a chunk from its last module to its first:
  // the buffers' order, so that buckets fill (and reduce) in that order.
  std::vector<ParameterSpec> specs;
  for (auto c = chunks.rbegin(); c != chunks.rend(); ++c) {
    std::vector<ParameterSpec> forward_order = c->module->parameters();
    for (auto p = forward_order.rbegin(); p != forward_order.rend(); ++p)
      specs.push_back(*p);
  }
  std::map<std::string, int> local_users;  // modules of this rank declaring each parameter
  run_agreed(world, [&] {
    // A name declared twice is one parameter used by two modules when one declaration borrows it (tied weights) and
    // both describe the same tensor; anything else is a naming mistake.
    std::map<std::string, std::size_t> seen;  // name -> its place in `unique`
    std::vector<ParameterSpec> unique;
    for (const ParameterSpec& p : specs) {
      p.validate();
      // Checked here, with or without checkpoints: a name a checkpoint cannot hold would fail only at the first save.
      if (const std::optional<std::string> problem = ckpt::tensor_name_problem(p.name))
        throw UsageError("engine: a module declares a parameter whose name '" + p.name + "' " + *problem +
                         "; parameter names are what their checkpoint tensors are called: letters, digits and "
                         "_ . - : /, no empty, '.' or '..' part between slashes, at most 1024 characters (e.g. "
                         "\"h.3.attn.qkv.weight\")");
      auto [it, fresh] = seen.emplace(p.name, unique.size());
      if (fresh) {
        unique.push_back(p);
        continue;
      }
      ParameterSpec& first = unique[it->second];
      if (!p.borrowed && !first.borrowed)
        throw UsageError("engine: two parameters are named '" + p.name +
                         "'; every parameter needs its own name (a module that uses another's weight declares it "
                         "borrowed, as nn::VocabParallelLoss does for a tied embedding)");
      if (!first.same_parameter_as(p))
        throw UsageError("engine: a module borrows parameter '" + p.name +
                         "' with another shape, split or initialisation than the module that owns it; borrow a "
                         "weight of the same size and split");
      first.borrowed = first.borrowed && p.borrowed;  // borrowed only if nobody here owns it
    }
    for (const ParameterSpec& p : specs)
      ++local_users[p.name];
    specs = std::move(unique);
  });
  // Each agreed over the world on its own: each throws in its own group only (a data-parallel group, a pipeline
  // group; every rank of that group alike, after the group's last collective), and the groups that do not would
  // wait for the others in the next collective.
  run_agreed(world, [&] {
    detail::check_group_models_agree(*groups.dp, detail::ModelGroup::DataParallel, encode_specs(specs));
  });
  run_agreed(world, [&] {
    detail::check_group_models_agree(*groups.tp, detail::ModelGroup::TensorParallel, encode_specs(specs, false));
  });
  run_agreed(world, [&] { find_tied_parameters(specs, local_users); });
  const DType param_dtype = config.precision.param_dtype();
  // Agreed: the parameters, gradients and optimizer state may not fit in this rank's memory (and no collective runs
  // in here).
  run_agreed(world, [&] {
    buffers = std::make_unique<ParameterBuffers>(std::move(specs), param_dtype, *compute->dp, groups.coords.tp,
                                                 config.data_parallel, *ctx);
    buffers->initialize(config.seed);
    optimizer = std::make_unique<Optimizer>(*buffers, config.optimizer);
    loss_sum = ctx->zeros({1}, DType::F64);
    norm_sum = ctx->zeros({1}, DType::F64);
  });
  deferred_ready.assign(buffers->size(), false);
  for (const std::string& name : tied_local_names)
    deferred_ready[buffers->index_of(name)] = true;
  for (TiedGroup& g : tied)
    for (const std::string& name : g.names) {
      g.indices.push_back(buffers->index_of(name));
      deferred_ready[g.indices.back()] = true;
    }
  for (Chunk& c : chunks) {
    c.module->bind(*buffers);
    c.parameter_indices = c.module->parameter_indices(*buffers);
  }
  if (config.precision.uses_loss_scaling()) scaler = std::make_unique<DynamicLossScaler>(config.loss_scaler);
  channel = std::make_unique<PipelineChannel>(*compute->pp, param_dtype, *ctx);
  std::size_t largest_exchange = 0, largest_message = 0;
  for (const PipelineStep& op : program)
    largest_exchange = std::max(largest_exchange, op.transfers.size());
  for (const Chunk& c : chunks)
    largest_message = std::max({largest_message, static_cast<std::size_t>(shape_numel(c.input.shape)),
                                static_cast<std::size_t>(shape_numel(c.output.shape))});
  channel->reserve(largest_exchange, largest_message);
  state.context = ctx;
  state.activation_dtype = param_dtype;
  state.geometry = geometry;
  state.loss_sum = loss_sum.as<double>();
  if (holds_last) {
    const Chunk& last = chunks.back();
    for (const Slot& s : last.slots)
      state.targets.push_back(s.targets);
  }
  TENAX_LOG(Info, "engine") << "layout " << config.layout->to_string() << ", stage " << groups.coords.pp << " with "
                            << chunks.size() << " chunk(s), " << micro_batches << " micro-batches of "
                            << geometry.rows() << " tokens per step, " << to_string(spec.kind) << " schedule, "
                            << buffers->layout().total << " parameter elements on this rank, on " << ctx->describe();
}

Engine::Engine(Communicator& world, EngineConfig config, ChunkBuilder build, std::shared_ptr<const BatchSource> data)
    : impl_(std::make_unique<Impl>(world, std::move(config), std::move(data))) {
  detail::refuse_after_finalize("Engine::Engine()");
  if (world.backend() != Backend::Mpi)
    throw UsageError("engine: the world communicator must be a host (MPI) one, such as Runtime::world()");
  Impl& e = *impl_;
  run_agreed(e.world, [&] { e.resolve_layout(); });
  detail::check_config_agrees(e.world, e.config);  // before the groups: a layout that differs would split them wrongly
  // Determinism of the CPU path: one BLAS thread makes every matrix product's summation order fixed.
  set_deterministic_cpu_math();
  const detail::LocalRank local = detail::node_local_rank(world);
  e.nodes = local.nodes;
  // Each node made its own choice (its CPU may differ): the first rank of every node warns of a problem there.
  const kernels::cpu::BlasCoreChoice& blas = kernels::cpu::blas_core_choice();
  if (!blas.problem.empty() && local.rank == 0)
    TENAX_LOG(Warn, "engine") << "CPU matrix products: " << kernels::cpu::describe(blas);
  else if (world.rank() == 0)
    TENAX_LOG(Info, "engine") << "CPU matrix products: " << kernels::cpu::describe(blas);
  // In force until the model, its optimizer state and its checkpoint staging memory are all allocated. Set up right
  // after node_local_rank's collective, before anything of the model exists.
  detail::ModelMemoryLimit memory_limit(world, [&e] {
    return "rank " + std::to_string(e.world.rank()) + " (pipeline stage " + std::to_string(e.groups.coords.pp) +
           " of " + std::to_string(e.config.layout->pp) + ", tensor-parallel rank " +
           std::to_string(e.groups.coords.tp) + " of " + std::to_string(e.config.layout->tp) + ")";
  });
  e.make_groups();
  e.build_chunks(build);
  e.make_state();
  e.open_checkpoints();
  memory_limit.lift();
}

Engine::~Engine() {
  // Device memory is freed by the members' destructors: nothing queued may still use it.
  try {
    impl_->ctx->synchronize();
  } catch (const std::exception& e) {
    TENAX_LOG(Warn, "engine") << "device error while shutting down: " << e.what();
  }
}

long Engine::current_step() const {
  return impl_->step;
}
int Engine::rank() const {
  return impl_->world.rank();
}
const ParallelLayout& Engine::layout() const {
  return *impl_->config.layout;
}
const EngineConfig& Engine::config() const {
  return impl_->config;
}
std::string Engine::summary() const {
  return impl_->summary;
}

}  // namespace tenax
