#include "tenax/optimizer.hpp"

#include "tenax/error.hpp"
#include "tenax/ops.hpp"

namespace tenax {

OptimizerKind OptimizerConfig::parse_kind(const std::string& text) {
  if (text == "adamw") return OptimizerKind::AdamW;
  if (text == "sgd") return OptimizerKind::Sgd;
  throw UsageError("unknown optimizer '" + text + "': use adamw or sgd");
}

Optimizer::Optimizer(ParameterBuffers& buffers, OptimizerConfig config) : buffers_(buffers), config_(config) {
  std::size_t owned = 0;
  for (const FlatRange& r : buffers_.owned_ranges())
    owned += r.count;
  const auto n = static_cast<std::int64_t>(owned);
  ExecutionContext& ctx = buffers_.context();
  m_ = ctx.zeros({n}, DType::F32);
  if (config_.kind == OptimizerKind::AdamW) v_ = ctx.zeros({n}, DType::F32);
  if (buffers_.param_dtype() != DType::F32) {
    // The master weights start as the (already rounded) initial parameters, so every layout starts identically.
    master_ = ctx.zeros({n}, DType::F32);
    std::size_t at = 0;
    for (const FlatRange& r : buffers_.owned_ranges()) {
      ctx.copy(master_.as<float>() + at, buffers_.flat_weights() + r.begin, r.count * sizeof(float));
      at += r.count;
    }
  }
}

void Optimizer::set_learning_rate(float lr) {
  config_.adamw.lr = lr;
  config_.sgd.lr = lr;
}

void Optimizer::step() {
  ++steps_;
  ExecutionContext& ctx = buffers_.context();
  const DType lowp = buffers_.param_dtype();
  auto* params = static_cast<unsigned char*>(buffers_.flat_params());
  std::size_t at = 0;
  for (const FlatRange& r : buffers_.owned_ranges()) {
    // fp32: update the parameters in place; 16-bit: update the fp32 master and write the rounded parameters.
    float* master = lowp == DType::F32 ? buffers_.flat_weights() + r.begin : master_.as<float>() + at;
    void* lowp_out = lowp == DType::F32 ? nullptr : params + r.begin * dtype_size(lowp);
    const float* grad = buffers_.flat_grads() + r.begin;
    if (config_.kind == OptimizerKind::AdamW) {
      kernels::AdamWParams p = config_.adamw;
      p.step = steps_;
      ops::adamw_step(ctx, master, m_.as<float>() + at, v_.as<float>() + at, grad, lowp_out, lowp, r.count, p);
    } else {
      ops::sgd_momentum_step(ctx, master, m_.as<float>() + at, grad, lowp_out, lowp, r.count, config_.sgd);
    }
    at += r.count;
  }
  buffers_.publish_params();
}

std::vector<StateEntry> Optimizer::state_entries() {
  std::vector<StateEntry> out;
  auto append = [&](std::vector<StateEntry> more) {
    for (auto& e : more)
      out.push_back(std::move(e));
  };
  if (buffers_.param_dtype() != DType::F32) append(buffers_.owned_entries("master", master_.data(), DType::F32));
  if (config_.kind == OptimizerKind::AdamW) {
    append(buffers_.owned_entries("adamw.m", m_.data(), DType::F32));
    append(buffers_.owned_entries("adamw.v", v_.data(), DType::F32));
  } else {
    append(buffers_.owned_entries("sgd.momentum", m_.data(), DType::F32));
  }
  return out;
}

}  // namespace tenax
