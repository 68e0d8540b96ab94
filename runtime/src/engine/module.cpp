#include "tenax/module.hpp"

#include <algorithm>

#include "tenax/error.hpp"
#include "tenax/ops.hpp"

namespace tenax::nn {

std::string to_string(const TensorSpec& spec) {
  return std::string(dtype_name(spec.dtype)) + shape_to_string(spec.shape);
}

Module::Module(std::string name) : name_(std::move(name)) {}
Module::~Module() = default;

std::vector<std::size_t> Module::parameter_indices(const ParameterBuffers& buffers) const {
  std::vector<std::size_t> out;
  for (const ParameterSpec& p : parameters())
    out.push_back(buffers.index_of(p.name));
  return out;
}

void Module::check_tensor(const Tensor& t, const TensorSpec& want, const ExecutionContext& context,
                          const char* what) const {
  const bool right_memory = t.numel() == 0 || t.device() == context.device();
  if (t.shape() != want.shape || t.dtype() != want.dtype || !right_memory || (t.numel() > 0 && t.data() == nullptr))
    throw UsageError(name_ + ": " + what + " is " + (t.data() == nullptr && t.numel() > 0 ? "missing" : t.describe()) +
                     ", expected " + to_string(want) + " in " + context.describe() + " memory");
}

std::vector<Tensor> Module::per_slot(ExecutionContext& context, int slots, Shape shape, DType dtype) {
  std::vector<Tensor> out;
  for (int s = 0; s < slots; ++s)
    out.push_back(context.zeros(shape, dtype));
  return out;
}

// ---- Sequential ----

Sequential::Sequential(std::string name, std::vector<std::unique_ptr<Module>> children)
    : Module(std::move(name)), children_(std::move(children)) {
  if (children_.empty()) throw UsageError(this->name() + ": a Sequential needs at least one module");
  for (const auto& c : children_)
    if (!c) throw UsageError(this->name() + ": a child module is null");
}

std::vector<ParameterSpec> Sequential::parameters() const {
  std::vector<ParameterSpec> out;
  for (const auto& c : children_)
    for (ParameterSpec& p : c->parameters())
      out.push_back(std::move(p));
  return out;
}

void Sequential::bind(ParameterBuffers& buffers) {
  for (const auto& c : children_)
    c->bind(buffers);
}

std::vector<std::size_t> Sequential::parameter_indices(const ParameterBuffers& buffers) const {
  std::vector<std::size_t> out;
  for (const auto& c : children_)
    for (std::size_t i : c->parameter_indices(buffers))
      out.push_back(i);
  return out;
}

TensorSpec Sequential::prepare(const TensorSpec& input, const Geometry& geometry, int slots,
                               ExecutionContext& context) {
  specs_.assign(1, input);
  for (const auto& c : children_)
    specs_.push_back(c->prepare(specs_.back(), geometry, slots, context));
  activations_.clear();
  std::int64_t largest = 0;
  for (std::size_t i = 0; i + 1 < children_.size(); ++i) {
    const TensorSpec& out = specs_[i + 1];
    activations_.push_back(per_slot(context, slots, out.shape, out.dtype));
    largest = std::max(largest, shape_numel(out.shape) * static_cast<std::int64_t>(dtype_size(out.dtype)));
  }
  for (Tensor& g : grad_)
    g = context.zeros({std::max<std::int64_t>(largest, 1)}, DType::U8);
  output_ = specs_.back();
  return output_;
}

void Sequential::forward(StepState& step, int slot, const Tensor& input, const Tensor& output) {
  const std::size_t n = children_.size();
  for (std::size_t i = 0; i < n; ++i) {
    const Tensor& in = i == 0 ? input : activations_[i - 1].at(slot);
    const Tensor& out = i + 1 == n ? output : activations_[i].at(slot);
    children_[i]->forward(step, slot, in, out);
  }
}

void Sequential::backward(StepState& step, int slot, const Tensor& input, const Tensor& output,
                          const Tensor& output_grad, const Tensor& input_grad) {
  backward_each(step, slot, input, output, output_grad, input_grad, {});
}

void Sequential::backward_each(StepState& step, int slot, const Tensor& input, const Tensor& output,
                               const Tensor& output_grad, const Tensor& input_grad,
                               const std::function<void(Module&)>& after_child) {
  const std::size_t n = children_.size();
  Tensor g = output_grad;
  for (std::size_t i = n; i-- > 0;) {
    const Tensor& in = i == 0 ? input : activations_[i - 1].at(slot);
    const Tensor& out = i + 1 == n ? output : activations_[i].at(slot);
    Tensor in_grad = input_grad;
    if (i > 0) {
      // Gradients of intermediate activations alternate between the two buffers: child i reads one, writes the other.
      const TensorSpec& spec = specs_[i];
      in_grad = Tensor::view(grad_[(n - 1 - i) % 2].data(), spec.shape, spec.dtype, step.ctx().device());
    }
    children_[i]->backward(step, slot, in, out, g, in_grad);
    if (after_child) after_child(*children_[i]);
    g = in_grad;
  }
}

// ---- Residual ----

Residual::Residual(std::unique_ptr<Module> inner)
    : Module(inner ? inner->name() : "residual"), inner_(std::move(inner)) {
  if (!inner_) throw UsageError("Residual: the inner module is null");
}

TensorSpec Residual::prepare(const TensorSpec& input, const Geometry& geometry, int slots, ExecutionContext& context) {
  const TensorSpec out = inner_->prepare(input, geometry, slots, context);
  if (!(out == input) || input.dtype != DType::F32)
    throw UsageError(name() +
                     ": a residual connection needs an f32 module whose output matches its input, but it maps " +
                     to_string(input) + " to " + to_string(out));
  spec_ = input;
  return spec_;
}

void Residual::forward(StepState& step, int slot, const Tensor& input, const Tensor& output) {
  inner_->forward(step, slot, input, output);
  const auto n = static_cast<std::size_t>(output.numel());
  ops::add_inplace(step.ctx(), output.as<float>(), input.as<float>(), n);
  ops::round_to_dtype(step.ctx(), output.as<float>(), n, step.activation_dtype);
}

void Residual::backward(StepState& step, int slot, const Tensor& input, const Tensor& output, const Tensor& output_grad,
                        const Tensor& input_grad) {
  inner_->backward(step, slot, input, output, output_grad, input_grad);
  // The residual path: the output's gradient reaches the input unchanged, added to the inner module's.
  const auto n = static_cast<std::size_t>(input_grad.numel());
  ops::add_inplace(step.ctx(), input_grad.as<float>(), output_grad.as<float>(), n);
  ops::round_to_dtype(step.ctx(), input_grad.as<float>(), n, step.activation_dtype);
}

}  // namespace tenax::nn
