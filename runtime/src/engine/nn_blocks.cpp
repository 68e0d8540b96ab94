// LayerNorm and the GeLU MLP of a transformer block.
#include "tenax/error.hpp"
#include "tenax/layers.hpp"
#include "tenax/nn.hpp"
#include "tenax/ops.hpp"
#include "tenax/tensor_parallel.hpp"

namespace tenax::nn {

namespace {
TensorSpec matrix(std::size_t rows, std::size_t cols) {
  return {{static_cast<std::int64_t>(rows), static_cast<std::int64_t>(cols)}, DType::F32};
}
}  // namespace

LayerNorm::LayerNorm(std::string name, std::size_t features)
    : Module(name), features_(features), layer_(std::make_unique<tenax::LayerNorm>(name, features)) {
  if (features < 1) throw UsageError(this->name() + ": features must be >= 1");
}
LayerNorm::~LayerNorm() = default;

std::vector<ParameterSpec> LayerNorm::parameters() const {
  return layer_->parameters();
}
void LayerNorm::bind(ParameterBuffers& buffers) {
  layer_->bind(buffers);
}

TensorSpec LayerNorm::prepare(const TensorSpec& input, const Geometry& geometry, int slots, ExecutionContext& context) {
  spec_ = matrix(geometry.rows(), features_);
  if (!(input == spec_)) throw UsageError(name() + ": takes " + to_string(spec_) + " but is given " + to_string(input));
  const auto rows = static_cast<std::int64_t>(geometry.rows());
  mean_ = per_slot(context, slots, {rows});
  rstd_ = per_slot(context, slots, {rows});
  scratch_ = Tensor();
  return spec_;
}

void LayerNorm::forward(StepState& step, int slot, const Tensor& input, const Tensor& output) {
  check_tensor(input, spec_, step.ctx(), "the input");
  check_tensor(output, spec_, step.ctx(), "the output");
  layer_->forward(input.as<float>(), step.geometry.rows(), output.as<float>(), mean_.at(slot).as<float>(),
                  rstd_.at(slot).as<float>());
}

void LayerNorm::backward(StepState& step, int slot, const Tensor& input, const Tensor&, const Tensor& output_grad,
                         const Tensor& input_grad) {
  check_tensor(input, spec_, step.ctx(), "the input");
  check_tensor(output_grad, spec_, step.ctx(), "the output gradient");
  float* dx = nullptr;
  if (input_grad.numel() > 0) {
    check_tensor(input_grad, spec_, step.ctx(), "the input gradient");
    dx = input_grad.as<float>();
  } else {
    // The kernel always writes the input gradient; a first module of a chunk whose input needs none still computes it.
    if (scratch_.numel() == 0) scratch_ = step.ctx().empty(spec_.shape, DType::F32);
    dx = scratch_.as<float>();
  }
  layer_->backward(input.as<float>(), mean_.at(slot).as<float>(), rstd_.at(slot).as<float>(), output_grad.as<float>(),
                   step.geometry.rows(), dx);
}

GeluMlp::GeluMlp(std::string name, std::size_t hidden, std::size_t ffn, Communicator& tp, float fc1_std, float fc2_std)
    : Module(name),
      hidden_(hidden),
      fc1_(std::make_unique<tenax::ColumnParallelLinear>(name + ".fc1", hidden, ffn, tp, true, fc1_std)),
      fc2_(std::make_unique<tenax::RowParallelLinear>(name + ".fc2", ffn, hidden, tp, fc2_std)) {
  ffn_local_ = fc1_->out_features_local();
}
GeluMlp::~GeluMlp() = default;

std::vector<ParameterSpec> GeluMlp::parameters() const {
  std::vector<ParameterSpec> specs = fc1_->parameters();
  for (ParameterSpec& p : fc2_->parameters())
    specs.push_back(std::move(p));
  return specs;
}

void GeluMlp::bind(ParameterBuffers& buffers) {
  fc1_->bind(buffers);
  fc2_->bind(buffers);
}

TensorSpec GeluMlp::prepare(const TensorSpec& input, const Geometry& geometry, int slots, ExecutionContext& context) {
  spec_ = matrix(geometry.rows(), hidden_);
  if (!(input == spec_)) throw UsageError(name() + ": takes " + to_string(spec_) + " but is given " + to_string(input));
  const Shape local{static_cast<std::int64_t>(geometry.rows()), static_cast<std::int64_t>(ffn_local_)};
  pre_ = per_slot(context, slots, local);
  act_ = per_slot(context, slots, local);
  dact_ = context.zeros(local, DType::F32);
  dpre_ = context.zeros(local, DType::F32);
  return spec_;
}

void GeluMlp::forward(StepState& step, int slot, const Tensor& input, const Tensor& output) {
  check_tensor(input, spec_, step.ctx(), "the input");
  check_tensor(output, spec_, step.ctx(), "the output");
  const std::size_t rows = step.geometry.rows();
  float* pre = pre_.at(slot).as<float>();
  float* act = act_.at(slot).as<float>();
  fc1_->forward(input.as<float>(), rows, pre);
  ops::bias_gelu_forward(step.ctx(), pre, fc1_->bias(), act, rows, ffn_local_);
  fc2_->forward(act, rows, output.as<float>());
}

void GeluMlp::backward(StepState& step, int slot, const Tensor& input, const Tensor&, const Tensor& output_grad,
                       const Tensor& input_grad) {
  check_tensor(input, spec_, step.ctx(), "the input");
  check_tensor(output_grad, spec_, step.ctx(), "the output gradient");
  const std::size_t rows = step.geometry.rows();
  fc2_->backward(act_.at(slot).as<float>(), output_grad.as<float>(), rows, dact_.as<float>());
  ops::bias_gelu_backward(step.ctx(), pre_.at(slot).as<float>(), fc1_->bias(), dact_.as<float>(), dpre_.as<float>(),
                          fc1_->bias_grad(), rows, ffn_local_);
  if (input_grad.numel() > 0) check_tensor(input_grad, spec_, step.ctx(), "the input gradient");
  fc1_->backward(input.as<float>(), dpre_.as<float>(), rows, input_grad.numel() > 0 ? input_grad.as<float>() : nullptr);
}

}  // namespace tenax::nn
