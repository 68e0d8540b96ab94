// One optimizer step: the pipeline program over this rank's chunks (forward and backward of each micro-batch, batched
// exchanges with the neighbouring stages), the data-parallel gradient reduction, the overflow check and the update.
#include <chrono>
#include <cmath>
#include <cstring>

#include "engine/engine_state.hpp"
#include "parallel/collective.hpp"
#include "process/mpi_alive.hpp"
#include "tenax/error.hpp"
#include "tenax/kernels/reduction.hpp"
#include "tenax/log.hpp"

namespace tenax {

using metrics::Phase;

std::optional<metrics::StepMetrics::Scope> Engine::Impl::phase(Phase p) {
  if (metrics == nullptr) return std::nullopt;
  return metrics->measure(p);
}

Engine::Impl::Chunk& Engine::Impl::chunk_of(int virtual_stage) {
  return chunks.at(static_cast<std::size_t>(spec.chunk_of(virtual_stage)));
}

Engine::Impl::Slot& Engine::Impl::slot_for(int micro_batch, int virtual_stage) {
  Chunk& c = chunk_of(virtual_stage);
  auto it = c.slot_of.find(micro_batch);
  if (it == c.slot_of.end()) {
    if (c.free_slots.empty())
      throw std::logic_error("engine: no free activation slot for micro-batch " + std::to_string(micro_batch) +
                             " of virtual stage " + std::to_string(virtual_stage));
    it = c.slot_of.emplace(micro_batch, c.free_slots.back()).first;
    c.free_slots.pop_back();
  }
  return c.slots.at(static_cast<std::size_t>(it->second));
}

void Engine::Impl::release(int micro_batch, int virtual_stage) {
  Chunk& c = chunk_of(virtual_stage);
  auto it = c.slot_of.find(micro_batch);
  if (it == c.slot_of.end()) return;
  c.free_slots.push_back(it->second);
  c.slot_of.erase(it);
}

namespace {

// Column `column` (0: inputs, 1: targets) of micro-batch `mb`'s samples in this rank's batch (samples of seq_len + 1
// tokens, one after another).
void micro_batch_tokens(const std::int32_t* samples, std::size_t first_sample, std::size_t sequences,
                        std::size_t seq_len, int column, std::vector<std::int32_t>& out) {
  out.resize(sequences * seq_len);
  for (std::size_t j = 0; j < sequences; ++j)
    std::memcpy(out.data() + j * seq_len, samples + (first_sample + j) * (seq_len + 1) + column,
                seq_len * sizeof(std::int32_t));
}

}  // namespace

// Marks gradients final; a bucket that fills is reduced over data parallelism here. On the host that reduction is a
// blocking MPI call in the middle of backward, so its time is exposed communication, and the metrics say so (on a
// device it is only enqueued on the communicator's stream, overlapping the rest of backward).
void Engine::Impl::mark_ready(const std::vector<std::size_t>& indices) {
  auto t = phase(Phase::Comm);
  for (std::size_t i : indices)
    if (!deferred_ready[i]) buffers->mark_grad_ready(i);
}

// After the whole program: tied copies on other stages add their gradients (tenax/nn.hpp), then the tied and shared
// parameters' gradients are final.
void Engine::Impl::sum_tied_gradients() {
  auto t = phase(Phase::Comm);
  for (TiedGroup& g : tied)
    for (std::size_t i : g.indices)
      detail::all_reduce_in_context(*ctx, *g.comm, buffers->grad(i),
                                    static_cast<std::size_t>(shape_numel(buffers->spec(i).shape)), DType::F32,
                                    ReduceOp::Sum);
  for (std::size_t i = 0; i < deferred_ready.size(); ++i)
    if (deferred_ready[i]) buffers->mark_grad_ready(i);
}

void Engine::Impl::run_program(const std::vector<std::int32_t>* batch) {
  const int total_v = spec.total_virtual_stages(), stage = groups.coords.pp;
  const std::size_t seq = config.seq_len, sequences = geometry.sequences;
  std::vector<std::int32_t> host_tokens;
  for (Chunk& c : chunks)
    c.backwards_done = 0;
  std::vector<PipelineMessage> messages;
  auto local = [&](int virtual_stage) { return spec.stage_of(virtual_stage) == stage; };

  for (const PipelineStep& ps : program) {
    if (ps.kind == PipelineStep::Kind::Exchange) {
      messages.clear();
      for (const PipelineTransfer& t : ps.transfers) {
        const bool act = t.kind == PipelineTransfer::Kind::Activation;
        Tensor* buffer = nullptr;
        if (t.send) {
          buffer = act ? &slot_for(t.micro_batch, t.virtual_stage).output : &chunk_of(t.virtual_stage).input_grad;
        } else {
          Slot& s = slot_for(t.micro_batch, act ? t.virtual_stage + 1 : t.virtual_stage - 1);
          buffer = act ? &s.input : &s.output_grad;
        }
        messages.push_back({t.send, t.peer, buffer->as<float>(), static_cast<std::size_t>(buffer->numel())});
      }
      auto t = phase(Phase::Comm);
      channel->exchange(messages);
      continue;
    }
    const int mb = ps.micro_batch, vs = ps.virtual_stage;
    Chunk& chunk = chunk_of(vs);
    if (ps.kind == PipelineStep::Kind::Forward) {
      Slot& s = slot_for(mb, vs);
      const int index = chunk.slot_of.at(mb);
      auto t = phase(Phase::Compute);
      if (vs == 0) {
        micro_batch_tokens(batch->data(), static_cast<std::size_t>(mb) * sequences, sequences, seq, 0, host_tokens);
        ctx->upload(s.input.data(), host_tokens.data(), host_tokens.size() * sizeof(std::int32_t));
      } else if (local(vs - 1)) {
        ctx->copy(s.input.data(), slot_for(mb, vs - 1).output.data(), s.input.nbytes());
      }
      if (vs == total_v - 1) {
        micro_batch_tokens(batch->data(), static_cast<std::size_t>(mb) * sequences, sequences, seq, 1, host_tokens);
        ctx->upload(s.targets.data(), host_tokens.data(), host_tokens.size() * sizeof(std::int32_t));
      }
      chunk.module->forward(state, index, s.input, s.output);
      continue;
    }
    // Backward.
    Slot& s = slot_for(mb, vs);
    const int index = chunk.slot_of.at(mb);
    auto t = phase(Phase::Compute);
    Tensor output_grad;
    if (vs < total_v - 1) {
      if (local(vs + 1)) ctx->copy(s.output_grad.data(), chunk_of(vs + 1).input_grad.data(), s.output_grad.nbytes());
      output_grad = s.output_grad;
    }
    const Tensor input_grad = vs > 0 ? chunk.input_grad : Tensor();
    const bool last = ++chunk.backwards_done == micro_batches;
    auto* sequential = dynamic_cast<nn::Sequential*>(chunk.module.get());
    if (last && sequential != nullptr) {
      // Each module's gradients are final once its backward of the step's last micro-batch returned: their bucket
      // reductions start while the modules before it run their backward.
      sequential->backward_each(state, index, s.input, s.output, output_grad, input_grad,
                                [&](nn::Module& m) { mark_ready(m.parameter_indices(*buffers)); });
    } else {
      chunk.module->backward(state, index, s.input, s.output, output_grad, input_grad);
      if (last) mark_ready(chunk.parameter_indices);
    }
    release(mb, vs);
  }
}

namespace {

void wait_for_device_communication(ProcessGroups& compute, const ProcessGroups& host) {
  if (&compute == &host) return;  // MPI operations complete before they return
  for (Communicator* c : {compute.tp.get(), compute.pp.get(), compute.dp.get()})
    c->synchronize();
}

}  // namespace

// The global gradient norm: every element of every parameter counted once over all ranks (tensor-parallel replicas on
// tp rank 0 only; without ZeRO-1, on dp rank 0 only, since every dp rank holds the same reduced gradients).
static double global_grad_norm(Engine::Impl& e) {
  const bool zero1 = e.buffers->config().zero1;
  const bool count_dp = zero1 || e.groups.coords.dp == 0;
  double local = 0.0;
  const bool device = e.ctx->on_device();
  if (device) e.ctx->zero(e.norm_sum.data(), sizeof(double));
  if (count_dp) {
    const FlatLayout& layout = e.buffers->layout();
    for (std::size_t i = 0; i < e.buffers->size(); ++i) {
      const ParameterSpec& p = e.buffers->spec(i);
      if ((!p.tp_sharded && e.groups.coords.tp != 0) || p.stage_replica) continue;
      const std::size_t begin = layout.param_offset[i], end = begin + static_cast<std::size_t>(shape_numel(p.shape));
      for (const FlatRange& r : e.buffers->owned_ranges()) {
        const std::size_t lo = std::max(begin, r.begin), hi = std::min(end, r.begin + r.count);
        if (lo >= hi) continue;
        const float* g = e.buffers->flat_grads() + lo;
#if TENAX_HAVE_CUDA
        if (device) {
          kernels::cuda::sum_squares(g, hi - lo, e.norm_sum.as<double>(), e.ctx->stream());
          continue;
        }
#endif
        local += kernels::cpu::sum_squares(g, hi - lo);
      }
    }
  }
  if (device) e.ctx->download(&local, e.norm_sum.data(), sizeof(double));
  e.world.all_reduce(&local, &local, 1, DType::F64, ReduceOp::Sum);
  return std::sqrt(local);
}

float Engine::Impl::optimizer_phase(StepResult& result) {
  auto t = phase(Phase::Optimizer);
  if (scaler) {
    wait_for_device_communication(*compute, groups);  // the flag is read back next
    const float local_flag = buffers->unscale_and_check_owned(scaler->inverse_scale());
    result.skipped = scaler->update(agree_on_overflow(world, local_flag));
  }
  nonfinite_gradients = false;
  if (!result.skipped && config.grad_clip > 0.0f) {
    result.grad_norm = global_grad_norm(*this);
    nonfinite_gradients = !std::isfinite(result.grad_norm);
    const double coefficient = config.grad_clip / (result.grad_norm + 1e-6);
    if (coefficient < 1.0 && !nonfinite_gradients) buffers->unscale_and_check_owned(static_cast<float>(coefficient));
  } else if (!scaler) {
    // Nothing else looks at the gradients before the update: one that is not finite would make the weights it
    // touches non-finite, and the next checkpoint would save them. One pass over this rank's share (a scale of 1
    // changes no value) and one agreement.
    wait_for_device_communication(*compute, groups);
    nonfinite_gradients = agree_on_overflow(world, buffers->unscale_and_check_owned(1.0f));
  }
  const float lr = config.lr.at(step);
  if (!result.skipped && !nonfinite_gradients) {
    optimizer->set_learning_rate(lr);
    optimizer->step();
  }
  wait_for_device_communication(*compute, groups);
  return lr;
}

StepResult Engine::Impl::train_step() {
  const auto started = std::chrono::steady_clock::now();
  ++step;
  op_profile_step_begins();
  StepResult result;
  result.step = step;
  result.loss_scale = scaler ? scaler->scale() : 1.0f;
  const double global_tokens = static_cast<double>(config.global_batch) * static_cast<double>(config.seq_len);
  result.tokens = static_cast<std::size_t>(global_tokens);
  // Each token's loss weighs 1 / global_tokens: the data-parallel SUM of the gradients is then the batch mean's.
  state.grad_scale = static_cast<float>(result.loss_scale / global_tokens);
  state.logits_only = false;
  {
    auto t = phase(Phase::Compute);
    ctx->zero(loss_sum.data(), sizeof(double));
    buffers->zero_grads();
  }
  std::vector<std::int32_t> batch;
  if (holds_first || holds_last) {
    auto t = phase(Phase::DataWait);
    if (!loader || loader->options().first_index + loader->stats().batches != step - 1) {
      loader.reset();
      DataLoaderOptions o;
      o.batch_bytes = sequences_per_rank * (config.seq_len + 1) * sizeof(std::int32_t);
      o.workers = config.loader_workers;
      o.first_index = step - 1;
      const std::uint64_t per_rank = sequences_per_rank, global = static_cast<std::uint64_t>(config.global_batch);
      const std::uint64_t offset = static_cast<std::uint64_t>(groups.coords.dp) * per_rank;
      const std::size_t seq = config.seq_len;
      std::shared_ptr<const BatchSource> source = data;
      loader = std::make_unique<DataLoader>(
          o, [source, per_rank, global, offset, seq](std::int64_t index, std::span<std::byte> out) {
            source->fill(static_cast<std::uint64_t>(index) * global + offset, per_rank, seq,
                         reinterpret_cast<std::int32_t*>(out.data()));
          });
    }
    const Batch b = loader->next();
    batch.resize(b.host.size() / sizeof(std::int32_t));
    std::memcpy(batch.data(), b.host.data(), b.host.size());
  }
  run_program(&batch);
  sum_tied_gradients();
  result.buckets_reduced_early = buffers->buckets_reduced_during_backward();
  {
    auto t = phase(Phase::Comm);
    buffers->finish_grad_sync();
  }
  result.lr = optimizer_phase(result);
  // Only one rank per (dp replica) holds the loss: the tp ranks of the last stage computed the same value.
  double loss = 0.0;
  if (holds_last && groups.coords.tp == 0) ctx->download(&loss, loss_sum.data(), sizeof loss);
  {
    auto t = phase(Phase::Comm);
    world.all_reduce(&loss, &loss, 1, DType::F64, ReduceOp::Sum);
  }
  result.loss = loss / global_tokens;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  op_profile_step_ends();  // after the step's time: writing the profile is not the step's
  check_divergence(result);
  return result;
}

void Engine::Impl::check_divergence(const StepResult& r) {
  // Overflows that skip step after step at the smallest scale: the gradients overflow fp16 even unscaled.
  constexpr int kMaxSkipsAtMinScale = 10;
  skips_at_min_scale = r.skipped && r.loss_scale <= config.loss_scaler.min_scale ? skips_at_min_scale + 1 : 0;
  std::string problem;
  if (!r.skipped && nonfinite_gradients)
    problem = "its gradients are not finite (not applied)";
  else if (!r.skipped && !std::isfinite(r.loss))
    problem = "its loss is " + std::to_string(r.loss);
  else if (skips_at_min_scale >= kMaxSkipsAtMinScale)
    problem = "fp16 overflowed " + std::to_string(skips_at_min_scale) + " steps in a row at the smallest loss scale (" +
              std::to_string(config.loss_scaler.min_scale) + "), each skipped";
  if (problem.empty()) return;
  // Every rank sees the same agreed loss, norm and skips: all of them stop here together. Nothing of this step is
  // saved (run() saves after the step returns), so the checkpoints written so far keep finite weights; the one still
  // being written is of a step before, and is finished first.
  if (writer && last_saved && !last_saved_loaded) {
    try {
      writer->settle(static_cast<std::uint64_t>(*last_saved));
    } catch (const IoError& e) {
      if (world.rank() == 0) TENAX_LOG(Warn, "engine") << "the checkpoint of step " << *last_saved << ": " << e.what();
    }
  }
  const std::optional<std::uint64_t> committed = writer ? writer->last_committed_step() : std::nullopt;
  const std::string newest = committed ? "the newest this run committed: step " + std::to_string(*committed)
                                       : "this run committed none; older ones are as they were";
  throw UsageError("training diverged at step " + std::to_string(r.step) + ": " + problem +
                   ", so the weights can no longer be trusted and nothing from this step on is saved. The "
                   "checkpoints written before it are kept (" +
                   newest +
                   "): lower the learning rate (the examples' --lr), clip the gradients (EngineConfig::grad_clip, the "
                   "GPT example's --grad-clip) or train in higher "
                   "precision, then resume");
}

StepResult Engine::step() {
  detail::refuse_after_finalize("Engine::step()");
  if (impl_->in_run)
    throw UsageError(
        "Engine::step() called from run()'s step callback: run() takes every step itself; drive the engine with "
        "run() or with step() in a loop of your own, not both");
  return impl_->train_step();
}

}  // namespace tenax
