#include "tenax/tensor_parallel.hpp"

#include <string>

#include "parallel/collective.hpp"
#include "tenax/error.hpp"
#include "tenax/ops.hpp"

namespace tenax {

using kernels::Trans;

namespace {

std::size_t split(const std::string& layer, const char* what, std::size_t features, Communicator& tp) {
  const auto n = static_cast<std::size_t>(tp.size());
  if (features % n != 0)
    throw UsageError(
        layer + ": tensor-parallel size " + std::to_string(n) + " does not divide its " + what + " (" +
        std::to_string(features) +
        "); choose a tensor-parallel size (ParallelLayout::tp, the examples' --tp) among the divisors of " +
        std::to_string(features) + " or change the model size");
  return features / n;
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(std::string name, std::size_t in_features, std::size_t out_features,
                                           Communicator& tp, bool with_bias, float init_std, std::string weight_name)
    : name_(std::move(name)),
      weight_name_(weight_name.empty() ? name_ + ".weight" : weight_name),
      borrows_weight_(!weight_name.empty()),
      in_(in_features),
      out_(out_features),
      tp_(tp),
      with_bias_(with_bias),
      init_std_(init_std) {
  out_local_ = split(name_, "output features", out_, tp_);
  out_begin_ = out_local_ * static_cast<std::size_t>(tp_.rank());
}

std::vector<ParameterSpec> ColumnParallelLinear::parameters() const {
  const auto out = static_cast<std::int64_t>(out_), in = static_cast<std::int64_t>(in_);
  const auto local = static_cast<std::int64_t>(out_local_), begin = static_cast<std::int64_t>(out_begin_);
  std::vector<ParameterSpec> specs;
  specs.push_back({weight_name_, {out, in}, {begin, 0}, {local, in}, true, ParameterInit::Normal, init_std_});
  specs.back().borrowed = borrows_weight_;
  if (with_bias_) specs.push_back({name_ + ".bias", {out}, {begin}, {local}, true, ParameterInit::Zeros, 0.0f});
  return specs;
}

void ColumnParallelLinear::bind(ParameterBuffers& buffers) {
  ctx_ = &buffers.context();
  weight_dtype_ = buffers.param_dtype();
  weight_index_ = buffers.index_of(weight_name_);
  weight_ = buffers.weight(weight_index_);
  weight_lowp_ = buffers.param(weight_index_);
  weight_grad_ = buffers.grad(weight_index_);
  if (with_bias_) {
    bias_index_ = buffers.index_of(name_ + ".bias");
    bias_ = buffers.weight(bias_index_);
    bias_grad_ = buffers.grad(bias_index_);
  }
}

std::vector<std::size_t> ColumnParallelLinear::parameter_indices() const {
  if (with_bias_) return {weight_index_, bias_index_};
  return {weight_index_};
}

void ColumnParallelLinear::forward(const float* x, std::size_t rows, float* y, std::size_t ld_y) const {
  ops::gemm_mixed(*ctx_, weight_dtype_, Trans::No, Trans::Yes, rows, out_local_, in_, 1.0f, x, nullptr, in_, weight_,
                  weight_lowp_, in_, 0.0f, y, ld_y == 0 ? out_local_ : ld_y);
}

void ColumnParallelLinear::backward(const float* x, const float* dy, std::size_t rows, float* dx, std::size_t ld_dy) {
  ops::linear_backward_mixed(*ctx_, weight_dtype_, rows, in_, out_local_, dy, ld_dy == 0 ? out_local_ : ld_dy, x,
                             weight_, weight_lowp_, weight_grad_, dx);
  if (dx == nullptr) return;
  // The backward of the identity that fed every rank the same input: the input gradient is the sum of the ranks'.
  if (tp_.size() > 1) detail::all_reduce_in_context(*ctx_, tp_, dx, rows * in_, DType::F32, ReduceOp::Sum);
}

RowParallelLinear::RowParallelLinear(std::string name, std::size_t in_features, std::size_t out_features,
                                     Communicator& tp, float init_std)
    : name_(std::move(name)), in_(in_features), out_(out_features), tp_(tp), init_std_(init_std) {
  in_local_ = split(name_, "input features", in_, tp_);
  in_begin_ = in_local_ * static_cast<std::size_t>(tp_.rank());
}

std::vector<ParameterSpec> RowParallelLinear::parameters() const {
  const auto out = static_cast<std::int64_t>(out_), in = static_cast<std::int64_t>(in_);
  const auto local = static_cast<std::int64_t>(in_local_), begin = static_cast<std::int64_t>(in_begin_);
  return {{name_ + ".weight", {out, in}, {0, begin}, {out, local}, true, ParameterInit::Normal, init_std_},
          {name_ + ".bias", {out}, {0}, {out}, false, ParameterInit::Zeros, 0.0f}};
}

void RowParallelLinear::bind(ParameterBuffers& buffers) {
  ctx_ = &buffers.context();
  weight_dtype_ = buffers.param_dtype();
  weight_index_ = buffers.index_of(name_ + ".weight");
  weight_lowp_ = buffers.param(weight_index_);
  bias_index_ = buffers.index_of(name_ + ".bias");
  weight_ = buffers.weight(weight_index_);
  weight_grad_ = buffers.grad(weight_index_);
  bias_ = buffers.weight(bias_index_);
  bias_grad_ = buffers.grad(bias_index_);
}

std::vector<std::size_t> RowParallelLinear::parameter_indices() const {
  return {weight_index_, bias_index_};
}

void RowParallelLinear::forward(const float* x_local, std::size_t rows, float* y) const {
  ops::gemm_mixed(*ctx_, weight_dtype_, Trans::No, Trans::Yes, rows, out_, in_local_, 1.0f, x_local, nullptr, in_local_,
                  weight_, weight_lowp_, in_local_, 0.0f, y, out_);
  if (tp_.size() > 1) detail::all_reduce_in_context(*ctx_, tp_, y, rows * out_, DType::F32, ReduceOp::Sum);
  // The bias after the reduction: added once, not tp times.
  ops::bias_add(*ctx_, y, bias_, rows, out_);
}

void RowParallelLinear::backward(const float* x_local, const float* dy, std::size_t rows, float* dx_local) {
  ops::linear_backward_mixed(*ctx_, weight_dtype_, rows, in_local_, out_, dy, out_, x_local, weight_, weight_lowp_,
                             weight_grad_, dx_local);
  ops::bias_grad(*ctx_, dy, bias_grad_, rows, out_);
}

}  // namespace tenax
