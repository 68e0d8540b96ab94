#include "trainer.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "device_setup.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"

namespace tenax::examples {

ParallelLayout TrainConfig::layout(int world_size) const {
  if (tp < 1 || pp < 1 || dp < 0)
    throw UsageError("layout: --tp and --pp must be >= 1 and --dp >= 1 (or 0 to infer it)");
  if (dp == 0) return ParallelLayout::infer(world_size, tp, pp);
  ParallelLayout l{tp, pp, dp};
  l.validate(world_size);
  return l;
}

void TrainConfig::validate(int world_size) const {
  const ParallelLayout l = layout(world_size);
  model.validate(l);
  data_parallel.validate();
  loss_scaler.validate();
  if (batch < 1 || micro_batch < 1) throw UsageError("batch: --batch and --micro-batch must be >= 1");
  if (batch % l.dp != 0)
    throw UsageError("batch: the global batch of " + std::to_string(batch) + " sequences does not split evenly over " +
                     std::to_string(l.dp) +
                     " data-parallel ranks; use a --batch that is a multiple of dp=" + std::to_string(l.dp));
  const int per_rank = batch / l.dp;
  if (per_rank % micro_batch != 0)
    throw UsageError("batch: the micro-batch size " + std::to_string(micro_batch) + " does not divide the " +
                     std::to_string(per_rank) + " sequences each data-parallel rank gets per step (--batch " +
                     std::to_string(batch) + " / dp " + std::to_string(l.dp) + "); use a --micro-batch that divides " +
                     std::to_string(per_rank));
  if (!inject_overflow_at.empty() && !precision.uses_loss_scaling())
    throw UsageError("overflow injection tests the fp16 loss scaler: use it with --precision fp16");
}

Trainer::Trainer(Communicator& world, TrainConfig config)
    : world_(world), config_(std::move(config)), data_(config_.model.vocab, config_.branching, config_.seed) {
  config_.validate(world_.size());
  // Determinism of the CPU path: one BLAS thread makes every matrix product's summation order fixed.
  set_deterministic_cpu_math();
  groups_ = ProcessGroups::create(world_, config_.layout(world_.size()));
  if (config_.device == Device::Cuda) {
    device_context_ = make_cuda_context(world_);
    ctx_ = device_context_.get();
    // One NCCL world, split into the same groups as the MPI ones (ncclCommSplit: no extra unique-id exchange).
    nccl_world_ = make_nccl_communicator(world_, ctx_->device_index(), "world.nccl");
    nccl_groups_ = ProcessGroups::create(*nccl_world_, groups_.layout);
    compute_groups_ = &nccl_groups_;
  }
  const ParallelLayout& l = groups_.layout;
  ProcessGroups& compute = *compute_groups_;
  if (compute.pp->rank() != groups_.coords.pp)
    throw std::logic_error("pipeline group rank " + std::to_string(compute.pp->rank()) + " is not the stage index " +
                           std::to_string(groups_.coords.pp));
  micro_batches_ = config_.batch / l.dp / config_.micro_batch;
  rows_ = static_cast<std::size_t>(config_.micro_batch) * config_.model.seq_len;
  const int stage = groups_.coords.pp;
  actions_ = pipeline_schedule(config_.schedule, l.pp, stage, micro_batches_);
  slots_ = config_.schedule == PipelineScheduleKind::GPipe ? micro_batches_ : std::min(micro_batches_, l.pp - stage);

  const DType param_dtype = config_.precision.param_dtype();
  model_ = std::make_unique<StageModel>(config_.model, *compute.tp, stage, l.pp, rows_, slots_, param_dtype, *ctx_);
  buffers_ = std::make_unique<ParameterBuffers>(model_->parameters(), param_dtype, *compute.dp, groups_.coords.tp,
                                                config_.data_parallel, *ctx_);
  buffers_->initialize(config_.seed);
  model_->bind(*buffers_);
  optimizer_ = std::make_unique<Optimizer>(*buffers_, config_.optimizer);
  if (config_.precision.uses_loss_scaling()) scaler_ = std::make_unique<DynamicLossScaler>(config_.loss_scaler);
  channel_ = std::make_unique<PipelineChannel>(*compute.pp, param_dtype, *ctx_);
  activation_buffer_ = ctx_->zeros({static_cast<std::int64_t>(model_->activation_size())}, DType::F32);
  grad_buffer_ = ctx_->zeros({static_cast<std::int64_t>(model_->activation_size())}, DType::F32);
  TENAX_LOG(Info, "example") << "layout " << l.to_string() << ", stage " << stage << " with " << micro_batches_
                             << " micro-batches of " << rows_ << " tokens on " << ctx_->describe();
}

Trainer::~Trainer() {
  // Device memory is freed by the members' destructors: nothing queued on the stream may still use it.
  try {
    ctx_->synchronize();
  } catch (const std::exception& e) {
    TENAX_LOG(Warn, "example") << "device error while shutting down: " << e.what();
  }
}

void Trainer::fill_micro_batch(int mb, std::vector<std::int32_t>& inputs, std::vector<std::int32_t>& targets) const {
  const std::size_t seq = config_.model.seq_len;
  const auto per_rank = static_cast<std::uint64_t>(config_.batch / groups_.layout.dp);
  const std::uint64_t first = static_cast<std::uint64_t>(step_ - 1) * static_cast<std::uint64_t>(config_.batch) +
                              static_cast<std::uint64_t>(groups_.coords.dp) * per_rank +
                              static_cast<std::uint64_t>(mb) * static_cast<std::uint64_t>(config_.micro_batch);
  std::vector<std::int32_t> sequence(seq + 1);
  inputs.resize(rows_);
  targets.resize(rows_);
  for (int j = 0; j < config_.micro_batch; ++j) {
    data_.sample(first + static_cast<std::uint64_t>(j), seq, sequence.data());
    std::copy(sequence.begin(), sequence.end() - 1, inputs.begin() + static_cast<std::ptrdiff_t>(j * seq));
    std::copy(sequence.begin() + 1, sequence.end(), targets.begin() + static_cast<std::ptrdiff_t>(j * seq));
  }
}

std::optional<metrics::StepMetrics::Scope> Trainer::phase(metrics::Phase p) {
  if (metrics_ == nullptr) return std::nullopt;
  return metrics_->measure(p);
}

StepResult Trainer::step() {
  using metrics::Phase;
  ++step_;
  StepResult result;
  result.step = step_;
  result.loss_scale = scaler_ ? scaler_->scale() : 1.0f;
  const double global_rows = static_cast<double>(config_.batch) * static_cast<double>(config_.model.seq_len);
  // Each token's loss weighs 1/global_rows: the data-parallel SUM of the gradients is then the batch mean's gradient.
  const auto grad_scale = static_cast<float>(result.loss_scale / global_rows);
  const std::size_t n = model_->activation_size();

  std::size_t last_backward = 0;
  for (std::size_t i = 0; i < actions_.size(); ++i)
    if (actions_[i].op == PipelineOp::Backward) last_backward = i;

  {
    auto t = phase(Phase::Compute);
    buffers_->zero_grads();
  }
  double loss_sum = 0.0;
  std::vector<std::int32_t> inputs, targets;
  auto slot = [&](int mb) { return mb % slots_; };
  for (std::size_t i = 0; i < actions_.size(); ++i) {
    const PipelineAction& a = actions_[i];
    // Pipeline transfers block until the peer stage is ready: exposed communication. The data-parallel bucket
    // reductions started during backward overlap it and count as compute; what is left at finish_grad_sync is exposed.
    const bool transfer = a.op != PipelineOp::Forward && a.op != PipelineOp::Backward;
    auto t = phase(transfer ? Phase::Comm : Phase::Compute);
    switch (a.op) {
      case PipelineOp::RecvForward:
        channel_->recv_forward(activation_buffer_.as<float>(), n);
        break;
      case PipelineOp::Forward: {
        {
          // The batch is generated on the fly on this thread: its time is the step's data wait.
          auto data = phase(Phase::DataWait);
          fill_micro_batch(a.micro_batch, inputs, targets);
        }
        loss_sum += model_->forward(slot(a.micro_batch), inputs.data(), activation_buffer_.as<float>(), targets.data(),
                                    grad_scale);
        break;
      }
      case PipelineOp::SendForward:
        channel_->send_forward(model_->output(slot(a.micro_batch)), n);
        break;
      case PipelineOp::RecvBackward:
        channel_->recv_backward(grad_buffer_.as<float>(), n);
        break;
      case PipelineOp::Backward:
        model_->backward(slot(a.micro_batch), grad_buffer_.as<float>(), i == last_backward ? buffers_.get() : nullptr);
        if (i == last_backward) result.buckets_reduced_early = buffers_->buckets_reduced_during_backward();
        break;
      case PipelineOp::SendBackward:
        channel_->send_backward(model_->input_grad(slot(a.micro_batch)), n);
        break;
      case PipelineOp::SendForwardRecvBackward:
        channel_->send_forward_recv_backward(model_->output(slot(a.micro_batch)), grad_buffer_.as<float>(), n);
        break;
      case PipelineOp::SendBackwardRecvForward:
        channel_->send_backward_recv_forward(model_->input_grad(slot(a.micro_batch)), activation_buffer_.as<float>(),
                                             n);
        break;
    }
  }
  {
    auto t = phase(Phase::Comm);
    buffers_->finish_grad_sync();
  }

  auto optimizer_phase = phase(Phase::Optimizer);
  if (scaler_) {
    const bool inject = world_.rank() == world_.size() - 1 &&
                        std::find(config_.inject_overflow_at.begin(), config_.inject_overflow_at.end(), step_) !=
                            config_.inject_overflow_at.end();
    if (inject && !buffers_->owned_ranges().empty()) {
      const float inf = std::numeric_limits<float>::infinity();
      ctx_->upload(buffers_->flat_grads() + buffers_->owned_ranges().front().begin, &inf, sizeof inf);
    }
    wait_for_device_communication();  // the flag is read back next
    const float local_flag = buffers_->unscale_and_check_owned(scaler_->inverse_scale());
    result.skipped = scaler_->update(agree_on_overflow(world_, local_flag));
  }
  if (!result.skipped) optimizer_->step();
  // Device runs: the one read-back of the step (it waits for the step's kernels; the host loss sum above was 0).
  wait_for_device_communication();
  loss_sum += model_->take_loss_sum();
  optimizer_phase.reset();
  if (host_state_every_ > 0 && step_ % host_state_every_ == 0) sync_state_to_host();

  // Only one rank per (last stage, dp replica) holds a loss: the tp ranks of the last stage computed the same value.
  double loss = groups_.coords.pp == groups_.layout.pp - 1 && groups_.coords.tp == 0 ? loss_sum : 0.0;
  auto comm = phase(Phase::Comm);
  world_.all_reduce(&loss, &loss, 1, DType::F64, ReduceOp::Sum);
  result.loss = loss / global_rows;
  return result;
}

void Trainer::sync_state_to_host() {
  if (state_mirror_) state_mirror_->pull();
}

void Trainer::wait_for_device_communication() {
  if (compute_groups_ == &groups_) return;  // host run: MPI operations complete before they return
  // Each synchronize() is bounded by TENAX_COMM_TIMEOUT and reports NCCL's asynchronous errors: a dead peer becomes a
  // TimeoutError or CommError here (and the aborted communicator releases the kernels waiting on it) instead of a
  // read-back that waits for ever on a compute stream stuck behind a collective.
  for (Communicator* c : {compute_groups_->tp.get(), compute_groups_->pp.get(), compute_groups_->dp.get()})
    c->synchronize();
}

std::uint64_t Trainer::parameters_checksum() {
  if (!ctx_->on_device()) return global_checksum(buffers_->parameter_entries(), world_);
  HostStateMirror params(buffers_->parameter_entries(), *ctx_);
  params.pull();
  return global_checksum(params.host_entries(), world_);
}

std::vector<StateEntry> Trainer::state_entries() {
  std::vector<StateEntry> out = buffers_->parameter_entries();
  for (StateEntry& e : optimizer_->state_entries())
    out.push_back(std::move(e));
  if (!ctx_->on_device()) return out;
  if (!state_mirror_) state_mirror_ = std::make_unique<HostStateMirror>(std::move(out), *ctx_);
  state_mirror_->pull();
  return state_mirror_->host_entries();
}

TrainingProgress Trainer::progress() const {
  TrainingProgress p;
  p.step = step_;
  p.data_position = static_cast<std::uint64_t>(step_) * static_cast<std::uint64_t>(config_.batch);
  p.seed = config_.seed;
  p.optimizer_steps = optimizer_->steps_taken();
  p.loss_scaler = scaler_ ? scaler_->state() : DynamicLossScaler::State{1.0f, 0, 0, 0};
  return p;
}

void Trainer::restore(const TrainingProgress& p) {
  if (p.seed != config_.seed)
    throw UsageError("restore: the saved run used seed " + std::to_string(p.seed) + " but this one uses " +
                     std::to_string(config_.seed) + "; pass the saved run's --seed");
  if (p.step < 0 || p.optimizer_steps < 0 || p.optimizer_steps > p.step ||
      p.data_position != static_cast<std::uint64_t>(p.step) * static_cast<std::uint64_t>(config_.batch))
    throw UsageError("restore: the saved progress (step " + std::to_string(p.step) + ", data position " +
                     std::to_string(p.data_position) + ") does not fit a batch of " + std::to_string(config_.batch) +
                     " sequences; resume with the saved run's --batch");
  step_ = p.step;
  optimizer_->set_steps_taken(p.optimizer_steps);
  if (scaler_) scaler_->restore(p.loss_scaler);
  // Device runs: the checkpoint was loaded into the host copies handed out by state_entries().
  if (state_mirror_) state_mirror_->push();
  buffers_->refresh_weights();
}

}  // namespace tenax::examples
