// Linear layers: replicated, column-parallel and row-parallel (the last two over the primitives of
// tenax/tensor_parallel.hpp).
#include <cmath>

#include "tenax/error.hpp"
#include "tenax/nn.hpp"
#include "tenax/ops.hpp"
#include "tenax/tensor_parallel.hpp"

namespace tenax::nn {

using kernels::Trans;

namespace {
TensorSpec matrix(std::size_t rows, std::size_t cols) {
  return {{static_cast<std::int64_t>(rows), static_cast<std::int64_t>(cols)}, DType::F32};
}
}  // namespace

// ---- Linear (replicated) ----

Linear::Linear(std::string name, std::size_t in_features, std::size_t out_features, bool with_bias, float init_std)
    : Module(std::move(name)), in_(in_features), out_(out_features), with_bias_(with_bias), init_std_(init_std) {
  if (in_ < 1 || out_ < 1) throw UsageError(this->name() + ": input and output features must be >= 1");
}

std::vector<ParameterSpec> Linear::parameters() const {
  const auto out = static_cast<std::int64_t>(out_), in = static_cast<std::int64_t>(in_);
  std::vector<ParameterSpec> specs{
      {name() + ".weight", {out, in}, {0, 0}, {out, in}, false, ParameterInit::Normal, init_std_}};
  if (with_bias_) specs.push_back({name() + ".bias", {out}, {0}, {out}, false, ParameterInit::Zeros, 0.0f});
  return specs;
}

void Linear::bind(ParameterBuffers& buffers) {
  weight_dtype_ = buffers.param_dtype();
  const std::size_t w = buffers.index_of(name() + ".weight");
  weight_ = buffers.weight(w);
  weight_lowp_ = buffers.param(w);
  weight_grad_ = buffers.grad(w);
  if (with_bias_) {
    const std::size_t b = buffers.index_of(name() + ".bias");
    bias_ = buffers.weight(b);
    bias_grad_ = buffers.grad(b);
  }
}

TensorSpec Linear::prepare(const TensorSpec& input, const Geometry& geometry, int, ExecutionContext&) {
  in_spec_ = matrix(geometry.rows(), in_);
  if (!(input == in_spec_))
    throw UsageError(name() + ": takes " + to_string(in_spec_) + " but is given " + to_string(input));
  out_spec_ = matrix(geometry.rows(), out_);
  return out_spec_;
}

void Linear::forward(StepState& step, int, const Tensor& input, const Tensor& output) {
  check_tensor(input, in_spec_, step.ctx(), "the input");
  check_tensor(output, out_spec_, step.ctx(), "the output");
  const std::size_t rows = step.geometry.rows();
  ops::gemm_mixed(step.ctx(), weight_dtype_, Trans::No, Trans::Yes, rows, out_, in_, 1.0f, input.as<float>(), nullptr,
                  in_, weight_, weight_lowp_, in_, 0.0f, output.as<float>(), out_);
  if (with_bias_) ops::bias_add(step.ctx(), output.as<float>(), bias_, rows, out_);
}

void Linear::backward(StepState& step, int, const Tensor& input, const Tensor&, const Tensor& output_grad,
                      const Tensor& input_grad) {
  check_tensor(input, in_spec_, step.ctx(), "the input");
  check_tensor(output_grad, out_spec_, step.ctx(), "the output gradient");
  const std::size_t rows = step.geometry.rows();
  const float* dy = output_grad.as<float>();
  if (input_grad.numel() > 0) check_tensor(input_grad, in_spec_, step.ctx(), "the input gradient");
  ops::linear_backward_mixed(step.ctx(), weight_dtype_, rows, in_, out_, dy, out_, input.as<float>(), weight_,
                             weight_lowp_, weight_grad_, input_grad.numel() > 0 ? input_grad.as<float>() : nullptr);
  if (with_bias_) ops::bias_grad(step.ctx(), dy, bias_grad_, rows, out_);
}

// ---- ColumnParallelLinear ----

ColumnParallelLinear::ColumnParallelLinear(std::string name, std::size_t in_features, std::size_t out_features,
                                           Communicator& tp, bool with_bias, float init_std)
    : Module(name),
      layer_(std::make_unique<tenax::ColumnParallelLinear>(name, in_features, out_features, tp, with_bias, init_std)),
      with_bias_(with_bias) {}
ColumnParallelLinear::~ColumnParallelLinear() = default;

std::vector<ParameterSpec> ColumnParallelLinear::parameters() const {
  return layer_->parameters();
}
void ColumnParallelLinear::bind(ParameterBuffers& buffers) {
  layer_->bind(buffers);
}

TensorSpec ColumnParallelLinear::prepare(const TensorSpec& input, const Geometry& geometry, int, ExecutionContext&) {
  in_ = matrix(geometry.rows(), layer_->in_features());
  if (!(input == in_)) throw UsageError(name() + ": takes " + to_string(in_) + " but is given " + to_string(input));
  out_ = matrix(geometry.rows(), layer_->out_features_local());
  return out_;
}

void ColumnParallelLinear::forward(StepState& step, int, const Tensor& input, const Tensor& output) {
  check_tensor(input, in_, step.ctx(), "the input");
  check_tensor(output, out_, step.ctx(), "the output");
  layer_->forward(input.as<float>(), step.geometry.rows(), output.as<float>());
  if (with_bias_)
    ops::bias_add(step.ctx(), output.as<float>(), layer_->bias(), step.geometry.rows(), layer_->out_features_local());
}

void ColumnParallelLinear::backward(StepState& step, int, const Tensor& input, const Tensor&, const Tensor& output_grad,
                                    const Tensor& input_grad) {
  check_tensor(input, in_, step.ctx(), "the input");
  check_tensor(output_grad, out_, step.ctx(), "the output gradient");
  if (with_bias_)
    ops::bias_grad(step.ctx(), output_grad.as<float>(), layer_->bias_grad(), step.geometry.rows(),
                   layer_->out_features_local());
  if (input_grad.numel() > 0) check_tensor(input_grad, in_, step.ctx(), "the input gradient");
  layer_->backward(input.as<float>(), output_grad.as<float>(), step.geometry.rows(),
                   input_grad.numel() > 0 ? input_grad.as<float>() : nullptr);
}

// ---- RowParallelLinear ----

RowParallelLinear::RowParallelLinear(std::string name, std::size_t in_features, std::size_t out_features,
                                     Communicator& tp, float init_std)
    : Module(name), layer_(std::make_unique<tenax::RowParallelLinear>(name, in_features, out_features, tp, init_std)) {}
RowParallelLinear::~RowParallelLinear() = default;

std::vector<ParameterSpec> RowParallelLinear::parameters() const {
  return layer_->parameters();
}
void RowParallelLinear::bind(ParameterBuffers& buffers) {
  layer_->bind(buffers);
}

TensorSpec RowParallelLinear::prepare(const TensorSpec& input, const Geometry& geometry, int, ExecutionContext&) {
  in_ = matrix(geometry.rows(), layer_->in_features_local());
  if (!(input == in_)) throw UsageError(name() + ": takes " + to_string(in_) + " but is given " + to_string(input));
  out_ = matrix(geometry.rows(), layer_->out_features());
  return out_;
}

void RowParallelLinear::forward(StepState& step, int, const Tensor& input, const Tensor& output) {
  check_tensor(input, in_, step.ctx(), "the input");
  check_tensor(output, out_, step.ctx(), "the output");
  layer_->forward(input.as<float>(), step.geometry.rows(), output.as<float>());
}

void RowParallelLinear::backward(StepState& step, int, const Tensor& input, const Tensor&, const Tensor& output_grad,
                                 const Tensor& input_grad) {
  check_tensor(input, in_, step.ctx(), "the input");
  check_tensor(output_grad, out_, step.ctx(), "the output gradient");
  if (input_grad.numel() > 0) check_tensor(input_grad, in_, step.ctx(), "the input gradient");
  layer_->backward(input.as<float>(), output_grad.as<float>(), step.geometry.rows(),
                   input_grad.numel() > 0 ? input_grad.as<float>() : nullptr);
}

}  // namespace tenax::nn
