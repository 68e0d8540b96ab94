// Token and learned position embeddings.
#include "parallel/collective.hpp"
#include "tenax/error.hpp"
#include "tenax/layers.hpp"
#include "tenax/nn.hpp"
#include "tenax/ops.hpp"

namespace tenax::nn {
namespace {

// Both embeddings take the rows' token ids and give one feature vector a row.
TensorSpec token_lookup_specs(const std::string& name, const TensorSpec& input, const Geometry& geometry,
                              std::size_t features, TensorSpec& in, TensorSpec& out) {
  in = {{static_cast<std::int64_t>(geometry.rows())}, DType::I32};
  if (!(input == in))
    throw UsageError(name + ": takes token ids " + to_string(in) + " but is given " + to_string(input) +
                     " (an embedding starts the model's first stage)");
  out = {{static_cast<std::int64_t>(geometry.rows()), static_cast<std::int64_t>(features)}, DType::F32};
  return out;
}

}  // namespace

Embedding::Embedding(std::string name, std::size_t vocab, std::size_t features, float init_std)
    : Module(std::move(name)),
      vocab_(vocab),
      features_(features),
      layer_(std::make_unique<tenax::Embedding>(this->name(), vocab, features, init_std)) {
  if (vocab < 1 || features < 1) throw UsageError(this->name() + ": vocabulary and features must be >= 1");
}
Embedding::~Embedding() = default;

std::vector<ParameterSpec> Embedding::parameters() const {
  return layer_->parameters();
}
void Embedding::bind(ParameterBuffers& buffers) {
  layer_->bind(buffers);
}

TensorSpec Embedding::prepare(const TensorSpec& input, const Geometry& geometry, int, ExecutionContext&) {
  return token_lookup_specs(name(), input, geometry, features_, in_, out_);
}

void Embedding::forward(StepState& step, int, const Tensor& input, const Tensor& output) {
  check_tensor(input, in_, step.ctx(), "the input");
  check_tensor(output, out_, step.ctx(), "the output");
  layer_->forward(input.as<std::int32_t>(), step.geometry.rows(), output.as<float>());
}

void Embedding::backward(StepState& step, int, const Tensor& input, const Tensor&, const Tensor& output_grad,
                         const Tensor&) {
  // Token ids have no gradient: only the table's is accumulated.
  check_tensor(input, in_, step.ctx(), "the input");
  check_tensor(output_grad, out_, step.ctx(), "the output gradient");
  layer_->backward(input.as<std::int32_t>(), output_grad.as<float>(), step.geometry.rows());
}

VocabParallelEmbedding::VocabParallelEmbedding(std::string name, std::size_t vocab, std::size_t features,
                                               Communicator& tp, float init_std)
    : Module(std::move(name)), vocab_(vocab), features_(features), tp_(tp), init_std_(init_std) {
  if (vocab < 1 || features < 1) throw UsageError(this->name() + ": vocabulary and features must be >= 1");
  const auto ranks = static_cast<std::size_t>(tp.size());
  if (vocab % ranks != 0)
    throw UsageError(
        this->name() + ": tensor-parallel size " + std::to_string(ranks) + " does not divide the " + "vocabulary (" +
        std::to_string(vocab) +
        "); choose a tensor-parallel size (ParallelLayout::tp, the examples' --tp) among its divisors or pad the "
        "vocabulary");
  local_ = vocab / ranks;
  begin_ = local_ * static_cast<std::size_t>(tp.rank());
}

std::vector<ParameterSpec> VocabParallelEmbedding::parameters() const {
  const auto v = static_cast<std::int64_t>(vocab_), f = static_cast<std::int64_t>(features_);
  const auto local = static_cast<std::int64_t>(local_), begin = static_cast<std::int64_t>(begin_);
  return {{name() + ".weight", {v, f}, {begin, 0}, {local, f}, true, ParameterInit::Normal, init_std_}};
}

void VocabParallelEmbedding::bind(ParameterBuffers& buffers) {
  const std::size_t i = buffers.index_of(name() + ".weight");
  table_ = buffers.weight(i);
  table_grad_ = buffers.grad(i);
}

TensorSpec VocabParallelEmbedding::prepare(const TensorSpec& input, const Geometry& geometry, int, ExecutionContext&) {
  return token_lookup_specs(name(), input, geometry, features_, in_, out_);
}

void VocabParallelEmbedding::forward(StepState& step, int, const Tensor& input, const Tensor& output) {
  check_tensor(input, in_, step.ctx(), "the input");
  check_tensor(output, out_, step.ctx(), "the output");
  const std::size_t rows = step.geometry.rows();
  try {
    ops::embedding_slice_forward(step.ctx(), input.as<std::int32_t>(), table_, output.as<float>(), rows, features_,
                                 vocab_, begin_, local_);
  } catch (const UsageError& e) {
    throw UsageError(name() + ": " + e.what());
  }
  // The sum of one rank's row and the others' zeros: exact in any order.
  if (tp_.size() > 1)
    detail::all_reduce_in_context(step.ctx(), tp_, output.data(), rows * features_, DType::F32, ReduceOp::Sum);
}

void VocabParallelEmbedding::backward(StepState& step, int, const Tensor& input, const Tensor&,
                                      const Tensor& output_grad, const Tensor&) {
  // The output gradient is the same on every tp rank (the layers after the all-reduce are replicated): each rank adds
  // it to the rows it holds. Token ids have no gradient.
  check_tensor(input, in_, step.ctx(), "the input");
  check_tensor(output_grad, out_, step.ctx(), "the output gradient");
  ops::embedding_slice_backward(step.ctx(), input.as<std::int32_t>(), output_grad.as<float>(), table_grad_,
                                step.geometry.rows(), features_, begin_, local_);
}

PositionalEmbedding::PositionalEmbedding(std::string name, std::size_t max_positions, std::size_t features,
                                         float init_std)
    : Module(std::move(name)), max_positions_(max_positions), features_(features), init_std_(init_std) {
  if (max_positions < 1 || features < 1) throw UsageError(this->name() + ": positions and features must be >= 1");
}

std::vector<ParameterSpec> PositionalEmbedding::parameters() const {
  const auto p = static_cast<std::int64_t>(max_positions_), f = static_cast<std::int64_t>(features_);
  return {{name() + ".weight", {p, f}, {0, 0}, {p, f}, false, ParameterInit::Normal, init_std_}};
}

void PositionalEmbedding::bind(ParameterBuffers& buffers) {
  const std::size_t i = buffers.index_of(name() + ".weight");
  table_ = buffers.weight(i);
  table_grad_ = buffers.grad(i);
}

TensorSpec PositionalEmbedding::prepare(const TensorSpec& input, const Geometry& geometry, int, ExecutionContext&) {
  if (geometry.seq_len > max_positions_)
    throw UsageError(name() + ": sequences of " + std::to_string(geometry.seq_len) + " tokens need more than its " +
                     std::to_string(max_positions_) + " positions; raise the model's maximum sequence length");
  spec_ = {{static_cast<std::int64_t>(geometry.rows()), static_cast<std::int64_t>(features_)}, DType::F32};
  if (!(input == spec_)) throw UsageError(name() + ": takes " + to_string(spec_) + " but is given " + to_string(input));
  return spec_;
}

void PositionalEmbedding::forward(StepState& step, int, const Tensor& input, const Tensor& output) {
  check_tensor(input, spec_, step.ctx(), "the input");
  check_tensor(output, spec_, step.ctx(), "the output");
  const std::size_t block = step.geometry.seq_len * features_;
  // Every sequence of the micro-batch gets positions 0 .. seq_len-1.
  for (std::size_t s = 0; s < step.geometry.sequences; ++s) {
    float* y = output.as<float>() + s * block;
    if (y != input.as<float>() + s * block) step.ctx().copy(y, input.as<float>() + s * block, block * sizeof(float));
    ops::add_inplace(step.ctx(), y, table_, block);
  }
}

void PositionalEmbedding::backward(StepState& step, int, const Tensor&, const Tensor&, const Tensor& output_grad,
                                   const Tensor& input_grad) {
  check_tensor(output_grad, spec_, step.ctx(), "the output gradient");
  const std::size_t block = step.geometry.seq_len * features_;
  for (std::size_t s = 0; s < step.geometry.sequences; ++s)
    ops::add_inplace(step.ctx(), table_grad_, output_grad.as<float>() + s * block, block);
  if (input_grad.numel() > 0) {
    check_tensor(input_grad, spec_, step.ctx(), "the input gradient");
    if (input_grad.data() != output_grad.data())
      step.ctx().copy(input_grad.data(), output_grad.data(), output_grad.nbytes());
  }
}

}  // namespace tenax::nn
