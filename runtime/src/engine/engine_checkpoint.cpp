// Checkpoints of the engine's state: every parameter, master weight and optimizer moment (derived from the parameter
// buffers and the optimizer: the model developer lists nothing) and the progress, saved asynchronously in any layout
// and resumed into any other (tenax/checkpoint.hpp).
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "engine/checkpoint_interval.hpp"
#include "engine/engine_state.hpp"
#include "process/mpi_alive.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"

namespace tenax {
namespace {

std::vector<std::uint64_t> dims(const Shape& s) {
  return {s.begin(), s.end()};
}

// State entries as checkpoint shards (device entries as device shards, copied on the compute stream).
std::vector<TensorShard> shards_of(const std::vector<StateEntry>& entries, bool primary_only) {
  std::vector<TensorShard> out;
  for (const StateEntry& e : entries)
    if (!primary_only || e.primary) {
      out.push_back(TensorShard::block(e.name, e.dtype, dims(e.global_shape), dims(e.offset), dims(e.shape), e.data));
      out.back().memory = e.device == Device::Cuda ? MemoryKind::Device : MemoryKind::Host;
    }
  return out;
}

// What a checkpoint needs beyond the tensors. The data position is step x global batch, and the batch source is a pure
// function of it, so (step, global batch) is the data's whole state.
struct Progress {
  long step = 0;
  long optimizer_steps = 0;
  std::uint64_t samples = 0;
  std::uint64_t seed = 0;
  std::int64_t global_batch = 0;
  DynamicLossScaler::State loss_scaler{1.0f, 0, 0, 0};
};

}  // namespace

std::vector<StateEntry> Engine::Impl::state_entries() {
  std::vector<StateEntry> out = buffers->parameter_entries();
  for (StateEntry& e : optimizer->state_entries())
    out.push_back(std::move(e));
  return out;
}

Blobs Engine::Impl::progress_blobs() const {
  Progress p;
  p.step = step;
  p.optimizer_steps = optimizer->steps_taken();
  p.samples = static_cast<std::uint64_t>(step) * static_cast<std::uint64_t>(config.global_batch);
  p.seed = config.seed;
  p.global_batch = config.global_batch;
  if (scaler) p.loss_scaler = scaler->state();
  Blobs b;
  put_value(b, "engine.progress", p);
  // Beside the progress (whose layout older checkpoints fix): what a sample position means.
  put_value(b, "engine.seq_len", static_cast<std::uint64_t>(config.seq_len));
  if (const std::string source = data->identity(); !source.empty())
    b["engine.data_source"] = std::vector<std::uint8_t>(source.begin(), source.end());
  if (!config.model_description.empty())
    b["engine.model"] = std::vector<std::uint8_t>(config.model_description.begin(), config.model_description.end());
  return b;
}

void Engine::Impl::open_checkpoints() {
  std::string dir = config.checkpoint.dir.empty() ? env::get_string("TENAX_CHECKPOINT_DIR") : config.checkpoint.dir;
  const bool none_asked_for = dir == "none";  // "none" says so on purpose: no warning below
  if (none_asked_for) dir.clear();
  checkpoint_dir = dir;
  if (config.checkpoint.every < 0) throw UsageError("checkpoint: every must be >= 0 (0: no periodic saves)");
  if (!(std::isfinite(config.checkpoint.mtbf_s) && config.checkpoint.mtbf_s >= 0))
    throw UsageError("checkpoint: mtbf_s must be >= 0 seconds (0: the run's own, else TENAX_MTBF or TENAX_NODE_MTBF)");
  shared_interval.every = config.checkpoint.automatic && config.checkpoint.every == 0 ? 50 : config.checkpoint.every;
  if (config.checkpoint.max_failures < 1)
    throw UsageError("checkpoint: max_failures must be >= 1 (consecutive failed saves before the run stops)");
  if (checkpoint_dir.empty()) {
    if ((config.checkpoint.every > 0 || config.checkpoint.automatic) && !none_asked_for && world.rank() == 0)
      TENAX_LOG(Warn, "engine") << "checkpoints are asked for (every " << config.checkpoint.every
                                << (config.checkpoint.automatic ? ", automatic" : "")
                                << ") but there is no checkpoint directory (EngineConfig::checkpoint.dir, or "
                                   "TENAX_CHECKPOINT_DIR, which tenax-launch --checkpoint-dir sets): nothing is saved";
    return;
  }
  // The configuration's directories and keep win where it sets them; every other checkpoint setting comes from the
  // environment.
  CheckpointOptions o = CheckpointOptions::tuning_from_env();
  o.dir = checkpoint_dir;
  if (config.checkpoint.keep > 0) o.keep = config.checkpoint.keep;
  o.layout = *config.layout;
  o.cuda_stream = ctx->stream();
  if (!config.checkpoint.local_dir.empty())
    o.local_dir = config.checkpoint.local_dir == "none" ? "" : config.checkpoint.local_dir;
  if (config.checkpoint.local_every < 0) throw UsageError("checkpoint: local_every must be >= 0 (0: none)");
  // Writing uses the primary holder of each element only (replicas are written once); the writer checks at once that
  // every rank can write the directory and sees the same one. A node-local copy holds every entry of the rank,
  // replicas included, so that a restart from it needs nothing from another rank.
  writer = std::make_unique<Checkpointer>(
      world, o, shards_of(state_entries(), true),
      o.local_dir.empty() ? std::vector<TensorShard>{} : shards_of(state_entries(), false));
}

ResumeInfo Engine::Impl::resume() {
  ResumeInfo info;
  info.step = step;  // nothing loaded: training continues after the step the engine is at
  if (checkpoint_dir.empty()) return info;
  const auto start = std::chrono::steady_clock::now();
  CheckpointOptions o = writer->options();
  o.read_only = true;
  // Every replica must receive the saved values, not only the primary holders: load through all entries.
  Checkpointer reader(world, o, shards_of(state_entries(), false));
  LoadResult r = reader.load();
  info.rejected = r.rejected;
  if (!r.loaded) return info;
  const Progress p = get_value<Progress>(r.blobs, "engine.progress");
  if (static_cast<std::uint64_t>(p.step) != r.step || p.step < 0 || p.optimizer_steps < 0 || p.optimizer_steps > p.step)
    throw IoError("checkpoint " + r.path + " is for step " + std::to_string(r.step) + " but its progress says step " +
                  std::to_string(p.step) + "; remove the directory or point the checkpoint directory elsewhere");
  if (p.global_batch != config.global_batch)
    throw UsageError("checkpoint " + r.path + " was saved with a global batch of " + std::to_string(p.global_batch) +
                     " sequences, this run uses " + std::to_string(config.global_batch) +
                     ": the data position would not continue where it stopped; resume with the saved batch");
  if (r.blobs.count("engine.seq_len")) {
    const auto saved = get_value<std::uint64_t>(r.blobs, "engine.seq_len");
    if (saved != config.seq_len)
      throw UsageError("checkpoint " + r.path + " was saved with sequences of " + std::to_string(saved) +
                       " tokens, this run uses " + std::to_string(config.seq_len) +
                       ": the data position would not continue where it stopped; resume with the saved length");
  }
  if (const auto saved = r.blobs.find("engine.model"); saved != r.blobs.end() && !config.model_description.empty()) {
    const std::string was(saved->second.begin(), saved->second.end());
    if (was != config.model_description)
      throw UsageError("checkpoint " + r.path + " was saved by the model '" + was + "', this run builds '" +
                       config.model_description +
                       "': the saved weights would be read as another model. Resume with the saved model's options, "
                       "or give this model a checkpoint directory of its own");
  }
  if (const auto saved = r.blobs.find("engine.data_source"); saved != r.blobs.end() && world.rank() == 0) {
    const std::string was(saved->second.begin(), saved->second.end()), is = data->identity();
    if (!is.empty() && is != was)
      TENAX_LOG(Warn, "engine") << "checkpoint " << r.path << " was saved by a run reading " << was
                                << "; this run reads " << is << ": training continues at sample position " << p.samples
                                << " of the other data (resume with the saved dataset to continue "
                                << "exactly where the run stopped)";
  }
  if (p.seed != config.seed)
    throw UsageError("checkpoint " + r.path + " was saved by a run with seed " + std::to_string(p.seed) +
                     ", this one uses " + std::to_string(config.seed) + "; resume with the saved run's seed");
  step = p.step;
  optimizer->set_steps_taken(p.optimizer_steps);
  if (scaler) scaler->restore(p.loss_scaler);
  buffers->refresh_weights();
  last_saved = step;
  last_saved_loaded = !r.node_local;
  last_saved_local_only = r.node_local;
  info.resumed = true;
  info.step = step;
  info.path = r.path;
  info.saved_layout = r.saved_layout;
  info.saved_world_size = r.saved_world_size;
  info.node_local = r.node_local;
  info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  TENAX_LOG(Debug, "engine") << "checkpoint of step " << step << " loaded in " << info.seconds << " s";
  return info;
}

void Engine::Impl::save_checkpoint(bool emergency) {
  if (!writer) return;
  // A checkpoint is never written twice: its commit is what is left. One resumed from a node-local copy alone is
  // written to the shared tier now (the node-local copies go with the job).
  if (last_saved == step && !last_saved_local_only) {
    settle_checkpoint();
    return;
  }
  last_saved = step;
  last_saved_loaded = last_saved_local_only = false;
  if (emergency)
    writer->emergency_save(static_cast<std::uint64_t>(step), progress_blobs());
  else
    writer->save(static_cast<std::uint64_t>(step), progress_blobs());
}

void Engine::Impl::settle_checkpoint() {
  if (!writer || (last_saved == step && last_saved_loaded)) return;
  writer->settle(static_cast<std::uint64_t>(step));
}

void Engine::Impl::after_step_checkpoint(double step_seconds) {
  if (!writer) return;
  for (TierInterval* tier : {&shared_interval, &local_interval}) {
    tier->step_seconds += step_seconds;
    ++tier->steps;
  }
  // Every rank raises the same IoError at the same call (the checkpointer agrees on outcomes), so every rank takes the
  // same branch here.
  try {
    using Clock = std::chrono::steady_clock;
    auto seconds_since = [](Clock::time_point start) {
      return std::chrono::duration<double>(Clock::now() - start).count();
    };
    const std::optional<long> saved_before = last_saved;
    if (config.checkpoint.automatic) {
      if (automatic_save_now(step - last_saved.value_or(0), shared_interval.every, writer->in_flight())) {
        if (const std::optional<SaveMeasure> measure = shared_cost.before_save())
          choose_interval(shared_interval, *measure, "checkpoint interval");
        const auto start = Clock::now();
        save_checkpoint(false);
        shared_cost.saved(seconds_since(start));
      }
    } else if (shared_interval.every > 0 && step % shared_interval.every == 0) {
      save_checkpoint(false);
    }
    const bool saved_shared = last_saved != saved_before;
    // Before the node-local save: settling the previous node-local copy may commit the shared checkpoint itself, and
    // the step it commits at counts as one it was in flight.
    const bool shared_in_flight_before = writer->in_flight();
    double local_save_s = -1;
    if (!writer->options().local_dir.empty() && last_saved != step) {
      if (config.checkpoint.local_automatic) {
        // A shared save leaves a node-local copy too: the interval runs from the newer of the two.
        const long since = step - std::max(last_saved.value_or(0), last_local_saved.value_or(0));
        if (since >= local_interval.every) {
          const auto start = Clock::now();
          last_local_saved = step;
          writer->save_local(static_cast<std::uint64_t>(step), progress_blobs());
          local_save_s = seconds_since(start);
        }
      } else if (config.checkpoint.local_every > 0 && step % config.checkpoint.local_every == 0) {
        writer->save_local(static_cast<std::uint64_t>(step), progress_blobs());
      }
    }
    const bool shared_in_flight = writer->in_flight();
    const auto poll_start = Clock::now();
    writer->progress();
    // Every rank learns of a commit at the same call, so every rank chooses at the same step.
    if (config.checkpoint.automatic)
      if (const std::optional<SaveMeasure> measure =
              shared_cost.polled(seconds_since(poll_start), shared_in_flight_before, writer->in_flight()))
        choose_interval(shared_interval, *measure, "checkpoint interval");
    if (config.checkpoint.local_automatic) {
      if (local_save_s >= 0)
        if (const std::optional<SaveMeasure> measure = local_cost.saved(local_save_s))
          choose_interval(local_interval, *measure, "node-local checkpoint interval");
      // Steps with a shared save or write in flight are left out: their progress() is the shared tier's. The time
      // runs to here: a choice's agreement waits for the slowest rank too.
      if (!saved_shared && !shared_in_flight) local_cost.polled(seconds_since(poll_start));
    }
  } catch (const IoError& error) {
    shared_cost.failed();
    const int in_a_row = save_failures.failed(step);
    if (in_a_row >= config.checkpoint.max_failures)
      throw IoError("checkpoint: " + std::to_string(in_a_row) + " checkpoint saves in a row failed (max_failures " +
                    std::to_string(config.checkpoint.max_failures) + "); the last: " + error.what());
    if (world.rank() == 0)
      TENAX_LOG(Warn, "engine") << "a checkpoint failed; training goes on and the next save tries again (" << in_a_row
                                << " of " << config.checkpoint.max_failures
                                << " failures in a row allowed): " << error.what();
  }
  save_failures.committed(writer->last_committed_step(), step);
}

namespace {

// A command line's steps-or-auto option: nullopt for "auto", else N >= 0; UsageError naming the option otherwise.
std::optional<int> parse_steps_or_auto(std::string_view option, std::string_view text, std::string_view zero) {
  if (text == "auto") return std::nullopt;
  int value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0)
    throw UsageError(std::string(option) + " '" + std::string(text) +
                     "': give a number of steps (0: " + std::string(zero) + ") or auto");
  return value;
}

}  // namespace

namespace {

// A steps-or-auto option's value, which may be the default the environment gave it: a bad one is then named as the
// variable's, which the user set (or the plugin's option), not as a command-line value the user never typed.
std::optional<int> parse_interval(std::string_view option, const char* variable, std::string_view text,
                                  std::string_view zero) {
  const std::string from_env = env::get_string(variable);
  const bool defaulted = !from_env.empty() && from_env == text;
  return parse_steps_or_auto(
      defaulted ? std::string(variable) + " (the default of " + std::string(option) + ")" : std::string(option), text,
      zero);
}

constexpr std::string_view kEveryZero = "only at the end and on preemption";
constexpr std::string_view kLocalEveryZero = "a node-local copy only with each shared save";

}  // namespace

CheckpointPolicy CheckpointPolicy::parse_every(std::string_view text, CheckpointPolicy policy) {
  const std::optional<int> steps = parse_interval("--checkpoint-every", "TENAX_CKPT_EVERY", text, kEveryZero);
  policy.automatic = !steps;
  if (steps) policy.every = *steps;  // with auto, `every` stays the interval until the first save
  return policy;
}

CheckpointPolicy CheckpointPolicy::parse_local_every(std::string_view text, CheckpointPolicy policy) {
  const std::optional<int> steps =
      parse_interval("--checkpoint-local-every", "TENAX_CKPT_LOCAL_EVERY", text, kLocalEveryZero);
  policy.local_automatic = !steps;
  if (steps) policy.local_every = *steps;
  return policy;
}

// Not validated here: a command line that names the option must win even over a bad variable (and --help must work);
// parse_every names the variable when its value is the one that fails.
std::string CheckpointPolicy::every_default(std::string_view built_in) {
  const std::string value = env::get_string("TENAX_CKPT_EVERY");
  return value.empty() ? std::string(built_in) : value;
}

std::string CheckpointPolicy::local_every_default(std::string_view built_in) {
  const std::string value = env::get_string("TENAX_CKPT_LOCAL_EVERY");
  return value.empty() ? std::string(built_in) : value;
}

void Engine::Impl::choose_interval(TierInterval& tier, const SaveMeasure& save, std::string_view what) {
  // The slowest rank's cost, step and write decide: every rank computes the same interval from the same agreed numbers.
  double measured[3] = {save.cost_s, tier.steps > 0 ? tier.step_seconds / tier.steps : 0,
                        static_cast<double>(save.steps_to_commit)};
  world.all_reduce(measured, measured, 3, DType::F64, ReduceOp::Max).wait();
  tier.step_seconds = 0;
  tier.steps = 0;
  const double cost = std::max(measured[0], 1e-6), step_s = measured[1];
  const int steps_to_commit = static_cast<int>(measured[2]);
  const long max_steps = std::max(1L, config.steps);
  MtbfChoice mtbf = choose_mtbf(config.checkpoint.mtbf_s, nodes);
  int chosen = automatic_interval_steps(cost, mtbf.seconds, step_s, max_steps, steps_to_commit);
  // A failure the node-local tier covers loses only the work since its newest copy, provided it saves at least as
  // often as the shared tier would for every failure: automatically (from its own cost and every failure), or every
  // local_every steps with local_every no longer than that interval. The shared tier then has to cover only the
  // failures beyond it. The same numbers on every rank: the same choice.
  const CheckpointPolicy& policy = config.checkpoint;
  if (&tier == &shared_interval && !writer->options().local_dir.empty() &&
      (policy.local_automatic || (policy.local_every > 0 && policy.local_every <= chosen))) {
    mtbf = choose_mtbf(policy.mtbf_s, nodes, FailuresCovered::BeyondNodeLocal);
    chosen = automatic_interval_steps(cost, mtbf.seconds, step_s, max_steps, steps_to_commit);
  }
  const int optimum = interval_in_steps(daly_interval_s(cost, mtbf.seconds), step_s, max_steps);
  // The MTBF in milliseconds where they matter (a short test run's failures), in tenths where they do not.
  std::ostringstream note;
  note << what << " (automatic, Young/Daly): " << chosen << " steps = " << std::fixed << std::setprecision(2)
       << chosen * step_s << " s";
  if (chosen > optimum)
    note << " (the " << steps_to_commit << " steps a save took to write and commit; the optimum was " << optimum << ")";
  note << ", from a save's blocking cost of " << std::setprecision(4) << cost << " s, steps of " << step_s
       << " s and an MTBF of " << std::setprecision(mtbf.seconds < 100 ? 3 : 1) << mtbf.seconds << " s from "
       << mtbf.source;
  if (chosen != tier.every && world.rank() == 0) TENAX_LOG(Info, "engine") << note.str();
  tier.every = chosen;
  tier.note = note.str();
}

std::string Engine::Impl::interval_notes() const {
  std::string notes;
  for (const std::string* note : {&shared_interval.note, &local_interval.note})
    if (!note->empty()) notes += "\n  " + *note;
  return notes;
}

ResumeInfo Engine::resume() {
  detail::refuse_after_finalize("Engine::resume()");
  if (impl_->in_run)
    throw UsageError(
        "Engine::resume() called from run()'s step callback: run() resumes once, before its first step; to go "
        "back to a checkpoint, end the run and start the program again");
  return impl_->resume();
}

void Engine::save() {
  detail::refuse_after_finalize("Engine::save()");
  if (!impl_->writer && !impl_->warned_unsaved && impl_->world.rank() == 0) {
    impl_->warned_unsaved = true;
    TENAX_LOG(Warn, "engine") << "save() at step " << impl_->step << " writes nothing: there is no checkpoint "
                              << "directory (EngineConfig::checkpoint.dir, or TENAX_CHECKPOINT_DIR, which tenax-launch "
                              << "--checkpoint-dir sets)";
  }
  impl_->save_checkpoint(false);
}

void Engine::wait_for_checkpoint() {
  detail::refuse_after_finalize("Engine::wait_for_checkpoint()");
  if (impl_->writer) impl_->writer->wait();
}

std::uint64_t Engine::parameters_checksum() {
  detail::refuse_after_finalize("Engine::parameters_checksum()");
  Impl& e = *impl_;
  if (!e.ctx->on_device()) return global_checksum(e.buffers->parameter_entries(), e.world);
  HostStateMirror params(e.buffers->parameter_entries(), *e.ctx);
  params.pull();
  return global_checksum(params.host_entries(), e.world);
}

}  // namespace tenax
