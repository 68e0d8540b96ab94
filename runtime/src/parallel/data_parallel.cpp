#include "tenax/data_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "parallel/init_values.hpp"
#include "tenax/error.hpp"
#include "tenax/kernels/cast.hpp"
#include "tenax/kernels/unscale.hpp"
#include "tenax/log.hpp"
#include "tenax/ops.hpp"

namespace tenax {

void DataParallelConfig::validate() const {
  if (bucket_bytes == 0)
    throw UsageError(
        "data parallel: the gradient bucket size (DataParallelConfig::bucket_bytes, the examples' "
        "--bucket-mb) must be > 0, e.g. 32 MiB");
}

FlatLayout FlatLayout::build(const std::vector<ParameterSpec>& specs, std::size_t bucket_bytes, int dp_size,
                             bool zero1) {
  FlatLayout l;
  const std::size_t cap = std::max<std::size_t>(1, bucket_bytes / sizeof(float));
  const std::size_t pad_to = zero1 ? static_cast<std::size_t>(dp_size) : 1;
  Bucket current;
  std::size_t used = 0;
  auto close = [&](std::size_t end_param) {
    current.end_param = end_param;
    current.count = (used + pad_to - 1) / pad_to * pad_to;
    l.buckets.push_back(current);
    l.total = current.begin + current.count;
    current = Bucket{};
    current.begin = l.total;
    current.first_param = end_param;
    used = 0;
  };
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto n = static_cast<std::size_t>(shape_numel(specs[i].shape));
    // A parameter never straddles buckets; a bucket closes once it holds at least `cap` elements.
    l.param_offset.push_back(current.begin + used);
    l.param_bucket.push_back(l.buckets.size());
    used += n;
    if (used >= cap) close(i + 1);
  }
  if (current.first_param < specs.size()) close(specs.size());
  return l;
}

FlatRange FlatLayout::owned(std::size_t bucket, int dp_rank, int dp_size, bool zero1) const {
  const Bucket& b = buckets.at(bucket);
  if (!zero1) return {b.begin, b.count};
  const std::size_t shard = b.count / static_cast<std::size_t>(dp_size);
  return {b.begin + static_cast<std::size_t>(dp_rank) * shard, shard};
}

ParameterBuffers::ParameterBuffers(std::vector<ParameterSpec> specs, DType param_dtype, Communicator& dp, int tp_rank,
                                   DataParallelConfig config, ExecutionContext& context)
    : specs_(std::move(specs)), param_dtype_(param_dtype), dp_(dp), config_(config), ctx_(context), tp_rank_(tp_rank) {
  config_.validate();
  if (param_dtype != DType::F32 && param_dtype != DType::BF16 && param_dtype != DType::F16)
    throw UsageError("parameter buffers: parameters must be f32, bf16 or f16, not " +
                     std::string(dtype_name(param_dtype)));
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    specs_[i].validate();
    for (std::size_t j = 0; j < i; ++j)
      if (specs_[j].name == specs_[i].name) throw std::logic_error("duplicate parameter name " + specs_[i].name);
  }
  layout_ = FlatLayout::build(specs_, config_.bucket_bytes, dp_.size(), config_.zero1);
  const auto total = static_cast<std::int64_t>(layout_.total);
  params_ = ctx_.zeros({total}, param_dtype_);
  if (param_dtype_ == DType::F32) {
    weights_ = params_.as<float>();
  } else {
    weights_storage_ = ctx_.zeros({total}, DType::F32);
    weights_ = weights_storage_.as<float>();
  }
  grads_ = ctx_.zeros({total}, DType::F32);
  std::size_t largest_shard = 0;
  for (std::size_t b = 0; b < layout_.buckets.size(); ++b) {
    owned_.push_back(layout_.owned(b, dp_.rank(), dp_.size(), config_.zero1));
    largest_shard = std::max(largest_shard, owned_.back().count);
  }
  if (config_.zero1) scatter_scratch_ = ctx_.zeros({static_cast<std::int64_t>(largest_shard)}, DType::F32);
  if (ctx_.on_device()) found_nonfinite_ = ctx_.zeros({1}, DType::F32);
  ready_in_bucket_.assign(layout_.buckets.size(), 0);
  param_ready_.assign(specs_.size(), false);
  bucket_done_.assign(layout_.buckets.size(), false);
  TENAX_LOG(Info, "parallel") << specs_.size() << " parameters, " << layout_.total << " elements in "
                              << layout_.buckets.size() << " gradient buckets" << (config_.zero1 ? " (ZeRO-1)" : "")
                              << " on " << ctx_.describe();
}

std::size_t ParameterBuffers::index_of(const std::string& name) const {
  for (std::size_t i = 0; i < specs_.size(); ++i)
    if (specs_[i].name == name) return i;
  throw std::logic_error("no parameter named " + name);
}

void ParameterBuffers::initialize(std::uint64_t seed) {
  // The values are made on the host (they are a function of the seed and the global index only); a device context
  // gets them through one host image of the whole parameter buffer.
  Tensor host_image;
  unsigned char* target = static_cast<unsigned char*>(params_.data());
  if (ctx_.on_device()) {
    host_image = Tensor::zeros({static_cast<std::int64_t>(layout_.total)}, param_dtype_);
    target = static_cast<unsigned char*>(host_image.data());
  }
  std::vector<float> values;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    const ParameterSpec& s = specs_[i];
    const auto n = static_cast<std::size_t>(shape_numel(s.shape));
    values.resize(n);
    detail::fill_init_values(s, seed, values.data());
    kernels::cpu::cast_from_f32(values.data(), target + layout_.param_offset[i] * dtype_size(param_dtype_),
                                param_dtype_, n);
  }
  if (ctx_.on_device()) ctx_.upload(params_.data(), host_image.data(), host_image.nbytes());
  refresh_weights();
}

void ParameterBuffers::zero_grads() {
  ctx_.zero(grads_.data(), grads_.nbytes());
}

void ParameterBuffers::mark_grad_ready(std::size_t i) {
  if (param_ready_.at(i)) throw std::logic_error("gradient of " + specs_[i].name + " marked ready twice in one step");
  param_ready_[i] = true;
  const std::size_t b = layout_.param_bucket[i];
  const FlatLayout::Bucket& bucket = layout_.buckets[b];
  if (++ready_in_bucket_[b] == bucket.end_param - bucket.first_param) {
    reduce_bucket(b);
    ++reduced_early_;
  }
}

void ParameterBuffers::reduce_bucket(std::size_t b) {
  bucket_done_[b] = true;
  if (dp_.size() == 1) return;
  const FlatLayout::Bucket& bucket = layout_.buckets[b];
  float* data = grads_.as<float>() + bucket.begin;
  // The reduction reads gradients the compute stream wrote: order it after them. The compute stream does not wait for
  // it here (finish_grad_sync does), so it overlaps the rest of the backward pass.
  ctx_.before_communication(dp_);
  comm_pending_ = true;
  if (!config_.zero1) {
    dp_.all_reduce(data, data, bucket.count, DType::F32, ReduceOp::Sum);
    return;
  }
  const FlatRange mine = owned_[b];
  float* scratch = scatter_scratch_.as<float>();
  dp_.reduce_scatter(data, scratch, mine.count, DType::F32, ReduceOp::Sum);
  // On the communicator's stream, after the reduce-scatter and before the next bucket's (which reuses the scratch).
  ctx_.copy_after_communication(dp_, grads_.as<float>() + mine.begin, scratch, mine.count * sizeof(float));
}

void ParameterBuffers::finish_grad_sync() {
  // Buckets whose parameters were not all marked (a layer without gradient this step) are reduced here, in bucket
  // order on every rank.
  for (std::size_t b = 0; b < bucket_done_.size(); ++b)
    if (!bucket_done_[b]) reduce_bucket(b);
  // Every reduction ran on the one communicator stream, in order: waiting for its end covers them all.
  if (comm_pending_) ctx_.after_communication(dp_);
  comm_pending_ = false;
  std::fill(param_ready_.begin(), param_ready_.end(), false);
  std::fill(ready_in_bucket_.begin(), ready_in_bucket_.end(), 0);
  std::fill(bucket_done_.begin(), bucket_done_.end(), false);
  reduced_early_ = 0;
}

float ParameterBuffers::unscale_and_check_owned(float inv_scale) {
  float found = 0.0f;
  if (!ctx_.on_device()) {
    for (const FlatRange& r : owned_)
      kernels::cpu::unscale_and_check(grads_.f32() + r.begin, r.count, inv_scale, &found);
    return found;
  }
  float* flag = found_nonfinite_.as<float>();
  ctx_.zero(flag, sizeof(float));
  for (const FlatRange& r : owned_)
    ops::unscale_and_check(ctx_, grads_.as<float>() + r.begin, r.count, inv_scale, flag);
  ctx_.download(&found, flag, sizeof(float));
  return found;
}

void ParameterBuffers::publish_params() {
  if (config_.zero1 && dp_.size() > 1) {
    auto* bytes = static_cast<unsigned char*>(params_.data());
    const std::size_t elem = dtype_size(param_dtype_);
    ctx_.before_communication(dp_);
    for (std::size_t b = 0; b < layout_.buckets.size(); ++b) {
      const FlatRange mine = owned_[b];
      dp_.all_gather(bytes + mine.begin * elem, bytes + layout_.buckets[b].begin * elem, mine.count, param_dtype_);
    }
    ctx_.after_communication(dp_);
  }
  refresh_weights();
}

void ParameterBuffers::refresh_weights() {
  if (param_dtype_ != DType::F32) ops::cast_to_f32(ctx_, params_.data(), param_dtype_, weights_, layout_.total);
}

bool ParameterBuffers::is_primary_holder(std::size_t i) const {
  const ParameterSpec& s = specs_.at(i);
  return (s.tp_sharded || tp_rank_ == 0) && dp_.rank() == 0 && !s.stage_replica;
}

std::vector<StateEntry> ParameterBuffers::parameter_entries() {
  std::vector<StateEntry> out;
  auto* bytes = static_cast<unsigned char*>(params_.data());
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    const ParameterSpec& s = specs_[i];
    out.push_back({"param/" + s.name, s.global_shape, s.offset, s.shape,
                   bytes + layout_.param_offset[i] * dtype_size(param_dtype_), param_dtype_, is_primary_holder(i),
                   ctx_.device()});
  }
  return out;
}

std::vector<StateEntry> ParameterBuffers::owned_entries(const std::string& prefix, void* packed, DType dtype) {
  std::vector<StateEntry> out;
  auto* base = static_cast<unsigned char*>(packed);
  const std::size_t elem = dtype_size(dtype);
  std::size_t packed_at = 0;  // where the current owned range starts in `packed`
  for (std::size_t b = 0; b < owned_.size(); ++b) {
    const FlatRange r = owned_[b];
    const FlatLayout::Bucket& bucket = layout_.buckets[b];
    for (std::size_t i = bucket.first_param; i < bucket.end_param; ++i) {
      const ParameterSpec& s = specs_[i];
      const std::size_t p_begin = layout_.param_offset[i];
      const std::size_t p_end = p_begin + static_cast<std::size_t>(shape_numel(s.shape));
      const std::size_t lo = std::max(p_begin, r.begin);
      const std::size_t hi = std::min(p_end, r.begin + r.count);
      if (lo >= hi) continue;
      const bool primary = (s.tp_sharded || tp_rank_ == 0) && (config_.zero1 || dp_.rank() == 0) && !s.stage_replica;
      for (const LocalBox& box :
           boxes_of_flat_range(s.shape, static_cast<std::int64_t>(lo - p_begin), static_cast<std::int64_t>(hi - lo))) {
        StateEntry e;
        e.name = prefix + "/" + s.name;
        e.global_shape = s.global_shape;
        e.offset = box.offset;
        for (std::size_t d = 0; d < e.offset.size(); ++d)
          e.offset[d] += s.offset[d];
        e.shape = box.shape;
        const std::size_t flat = p_begin + static_cast<std::size_t>(box.flat_begin);
        e.data = base + (packed_at + (flat - r.begin)) * elem;
        e.dtype = dtype;
        e.primary = primary;
        e.device = ctx_.device();
        out.push_back(std::move(e));
      }
    }
    packed_at += r.count;
  }
  return out;
}

}  // namespace tenax
