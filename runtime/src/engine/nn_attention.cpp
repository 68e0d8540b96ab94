// Causal self-attention and the transformer block.
#include <cmath>
#include <mutex>
#include <set>
#include <string>

#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"
#include "tenax/nn.hpp"
#include "tenax/ops.hpp"
#include "tenax/tensor_parallel.hpp"

namespace tenax::nn {

namespace {

std::size_t local_heads(const std::string& name, std::size_t hidden, std::size_t heads, Communicator& tp) {
  if (heads == 0 || hidden % heads != 0)
    throw UsageError(name + ": " + std::to_string(heads) + " heads do not divide the hidden size " +
                     std::to_string(hidden) + "; choose a number of heads that divides it");
  const auto n = static_cast<std::size_t>(tp.size());
  if (heads % n != 0)
    throw UsageError(name + ": tensor-parallel size " + std::to_string(n) + " does not divide the " +
                     std::to_string(heads) +
                     " attention heads (tensor parallelism splits attention by heads); "
                     "choose a tensor-parallel size (ParallelLayout::tp, the examples' --tp) among the divisors of " +
                     std::to_string(heads));
  return heads / n;
}

// Every layer of a model makes the same choice: say it once per process, not once per layer.
void log_once(const std::string& line) {
  static std::mutex mutex;
  static std::set<std::string> said;
  const std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(line).second) TENAX_LOG(Info, "attention") << line;
}

}  // namespace

CausalSelfAttention::CausalSelfAttention(std::string name, std::size_t hidden, std::size_t heads, Communicator& tp,
                                         float init_std, float proj_std, bool recompute)
    : Module(name),
      hidden_(hidden),
      heads_local_(local_heads(name, hidden, heads, tp)),
      head_dim_(heads == 0 ? 0 : hidden / heads),
      recompute_(recompute),
      qkv_(std::make_unique<tenax::ColumnParallelLinear>(name + ".qkv", hidden, 3 * hidden, tp, true, init_std)),
      proj_(std::make_unique<tenax::RowParallelLinear>(name + ".proj", hidden, hidden, tp, proj_std)) {}
CausalSelfAttention::~CausalSelfAttention() = default;

std::vector<ParameterSpec> CausalSelfAttention::parameters() const {
  std::vector<ParameterSpec> specs = qkv_->parameters();
  for (ParameterSpec& p : proj_->parameters())
    specs.push_back(std::move(p));
  return specs;
}

void CausalSelfAttention::bind(ParameterBuffers& buffers) {
  input_dtype_ = buffers.param_dtype();
  qkv_->bind(buffers);
  proj_->bind(buffers);
  bound_ = true;
  choose_core();
}

TensorSpec CausalSelfAttention::prepare(const TensorSpec& input, const Geometry& g, int slots,
                                        ExecutionContext& context) {
  const auto rows = static_cast<std::int64_t>(g.rows());
  spec_ = {{rows, static_cast<std::int64_t>(hidden_)}, DType::F32};
  if (!(input == spec_)) throw UsageError(name() + ": takes " + to_string(spec_) + " but is given " + to_string(input));
  const auto local = static_cast<std::int64_t>(heads_local_ * head_dim_);
  context_ = &context;
  sequences_ = g.sequences;
  seq_len_ = g.seq_len;
  slots_ = slots;
  merged_ = per_slot(context, slots, {rows, local});
  qkv_out_ = context.zeros({rows, 3 * local}, DType::F32);
  dqkv_ = context.zeros({rows, 3 * local}, DType::F32);
  dmerged_ = context.zeros({rows, local}, DType::F32);
  choose_core();
  return spec_;
}

void CausalSelfAttention::choose_core() {
  if (!bound_ || context_ == nullptr) return;
  ExecutionContext& context = *context_;
  const std::size_t B = sequences_, H = heads_local_, T = seq_len_, D = head_dim_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const std::string mode = env::get_string("TENAX_ATTENTION");
  fused_ = false;
  if (context.on_device() && mode != "batched") {
    const std::string why = ops::fused_attention_unsupported(context, B, H, T, D, scale, input_dtype_);
    if (why.empty()) {
      fused_ = true;
      log_once(ops::fused_attention_description(context, B, H, T, D, scale, input_dtype_));
    } else if (mode == "fused") {
      throw UsageError(name() + ": TENAX_ATTENTION=fused, but cuDNN's fused attention cannot run here: " + why +
                       "; set TENAX_ATTENTION=auto (or batched) to use the batched core");
    } else {
      log_once("batched attention core: " + why);
    }
  }
  const auto per_head = static_cast<std::int64_t>(B * H * T * D);
  q_.clear(), k_.clear(), v_.clear(), probs_.clear(), qkv16_.clear(), stats_.clear();
  o_ = do_ = dq_ = dk_ = dv_ = Tensor{};
  if (fused_) {
    qkv16_ = per_slot(context, slots_, {3 * per_head}, input_dtype_);
    stats_ = per_slot(context, slots_, {static_cast<std::int64_t>(B * H * T)});
    return;
  }
  q_ = per_slot(context, slots_, {per_head});
  k_ = per_slot(context, slots_, {per_head});
  v_ = per_slot(context, slots_, {per_head});
  const auto scores = static_cast<std::int64_t>(B * H * T * T);
  if (!recompute_) probs_ = per_slot(context, slots_, {scores});
  o_ = context.zeros({per_head}, DType::F32);
  do_ = context.zeros({per_head}, DType::F32);
  dq_ = context.zeros({per_head}, DType::F32);
  dk_ = context.zeros({per_head}, DType::F32);
  dv_ = context.zeros({per_head}, DType::F32);
}

void CausalSelfAttention::forward(StepState& step, int slot, const Tensor& input, const Tensor& output) {
  check_tensor(input, spec_, step.ctx(), "the input");
  check_tensor(output, spec_, step.ctx(), "the output");
  ExecutionContext& ctx = step.ctx();
  const std::size_t B = step.geometry.sequences, T = step.geometry.seq_len, H = heads_local_, D = head_dim_;
  const std::size_t rows = B * T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  float* qkv = qkv_out_.as<float>();
  qkv_->forward(input.as<float>(), rows, qkv);
  ops::bias_add(ctx, qkv, qkv_->bias(), rows, 3 * H * D);
  float* merged = merged_.at(slot).as<float>();
  if (fused_) {
    ops::fused_attention_forward(ctx, qkv, qkv16_.at(slot).data(), stats_.at(slot).as<float>(), merged, B, H, T, D,
                                 scale, input_dtype_);
  } else {
    float* q = q_.at(slot).as<float>();
    float* k = k_.at(slot).as<float>();
    float* v = v_.at(slot).as<float>();
    ops::split_heads(ctx, qkv, q, k, v, B, H, T, D);
    ops::attention_forward(ctx, q, k, v, o_.as<float>(), recompute_ ? nullptr : probs_.at(slot).as<float>(), B, H, T, D,
                           scale, input_dtype_);
    ops::merge_heads(ctx, o_.as<float>(), merged, B, H, T, D);
  }
  proj_->forward(merged, rows, output.as<float>());
}

void CausalSelfAttention::backward(StepState& step, int slot, const Tensor& input, const Tensor&,
                                   const Tensor& output_grad, const Tensor& input_grad) {
  check_tensor(input, spec_, step.ctx(), "the input");
  check_tensor(output_grad, spec_, step.ctx(), "the output gradient");
  if (input_grad.numel() > 0) check_tensor(input_grad, spec_, step.ctx(), "the input gradient");
  ExecutionContext& ctx = step.ctx();
  const std::size_t B = step.geometry.sequences, T = step.geometry.seq_len, H = heads_local_, D = head_dim_;
  const std::size_t rows = B * T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  proj_->backward(merged_.at(slot).as<float>(), output_grad.as<float>(), rows, dmerged_.as<float>());
  if (fused_) {
    ops::fused_attention_backward(ctx, qkv16_.at(slot).data(), stats_.at(slot).as<float>(),
                                  merged_.at(slot).as<float>(), dmerged_.as<float>(), dqkv_.as<float>(), B, H, T, D,
                                  scale, input_dtype_);
  } else {
    ops::merge_heads_backward(ctx, dmerged_.as<float>(), do_.as<float>(), B, H, T, D);
    ops::attention_backward(ctx, q_.at(slot).as<float>(), k_.at(slot).as<float>(), v_.at(slot).as<float>(),
                            do_.as<float>(), recompute_ ? nullptr : probs_.at(slot).as<float>(), dq_.as<float>(),
                            dk_.as<float>(), dv_.as<float>(), B, H, T, D, scale, input_dtype_);
    ops::split_heads_backward(ctx, dq_.as<float>(), dk_.as<float>(), dv_.as<float>(), dqkv_.as<float>(), B, H, T, D);
  }
  ops::bias_grad(ctx, dqkv_.as<float>(), qkv_->bias_grad(), rows, 3 * H * D);
  qkv_->backward(input.as<float>(), dqkv_.as<float>(), rows, input_grad.numel() > 0 ? input_grad.as<float>() : nullptr);
}

std::unique_ptr<Module> transformer_block(const std::string& name, std::size_t hidden, std::size_t heads,
                                          std::size_t layers, Communicator& tp, float init_std, bool recompute) {
  const float residual_std = init_std / std::sqrt(2.0f * static_cast<float>(std::max<std::size_t>(layers, 1)));
  std::vector<std::unique_ptr<Module>> attention;
  attention.push_back(std::make_unique<LayerNorm>(name + ".ln_1", hidden));
  attention.push_back(
      std::make_unique<CausalSelfAttention>(name + ".attn", hidden, heads, tp, init_std, residual_std, recompute));
  std::vector<std::unique_ptr<Module>> mlp;
  mlp.push_back(std::make_unique<LayerNorm>(name + ".ln_2", hidden));
  mlp.push_back(std::make_unique<GeluMlp>(name + ".mlp", hidden, 4 * hidden, tp, init_std, residual_std));
  std::vector<std::unique_ptr<Module>> block;
  block.push_back(std::make_unique<Residual>(std::make_unique<Sequential>(name + ".attention", std::move(attention))));
  block.push_back(std::make_unique<Residual>(std::make_unique<Sequential>(name + ".feed_forward", std::move(mlp))));
  return std::make_unique<Sequential>(name, std::move(block));
}

}  // namespace tenax::nn
