// ops:: dispatch of cuDNN's fused attention (tenax/ops.hpp): the casts around the kernels and the context's workspace.
#include <string>

#include "tenax/build_config.hpp"
#include "tenax/error.hpp"
#include "tenax/ops.hpp"
#include "tensor/op_profiler.hpp"

#if TENAX_HAVE_CUDA
#include "tenax/kernels/fused_attention.hpp"
#endif

namespace tenax::ops {

#if TENAX_HAVE_CUDA
namespace {

kernels::cuda::FusedAttentionShape shape_of(std::size_t B, std::size_t H, std::size_t T, std::size_t D, float scale,
                                            DType dtype) {
  return {B, H, T, D, dtype, scale};
}

// Byte offsets of the 16-bit scratch copies in the context's workspace, each 256-byte aligned, cuDNN's workspace last.
struct Scratch {
  std::size_t y16 = 0, dy16 = 0, dqkv16 = 0, cudnn = 0, bytes = 0;
};

Scratch scratch(std::size_t B, std::size_t H, std::size_t T, std::size_t D, bool backward, std::size_t cudnn_bytes) {
  Scratch s;
  const std::size_t head = B * H * T * D * 2;  // bytes of one 16-bit [B, H, T, D] tensor (sizes checked by the kernels)
  auto take = [&](std::size_t bytes) {
    const std::size_t at = s.bytes;
    s.bytes += (bytes + 255) / 256 * 256;
    return at;
  };
  s.y16 = take(head);
  if (backward) {
    s.dy16 = take(head);
    s.dqkv16 = take(3 * head);
  }
  s.cudnn = take(cudnn_bytes);
  return s;
}

}  // namespace
#endif

std::string fused_attention_unsupported(ExecutionContext& ctx, std::size_t B, std::size_t H, std::size_t T,
                                        std::size_t D, float scale, DType input_dtype) {
  if (!ctx.on_device()) return "fused attention runs on a CUDA execution context only";
#if TENAX_HAVE_CUDA
  ctx.activate();
  return kernels::cuda::fused_attention_unsupported(shape_of(B, H, T, D, scale, input_dtype));
#else
  return "this build has no CUDA";
#endif
}

std::string fused_attention_description(ExecutionContext& ctx, std::size_t B, std::size_t H, std::size_t T,
                                        std::size_t D, float scale, DType input_dtype) {
  if (!ctx.on_device()) return "";
#if TENAX_HAVE_CUDA
  ctx.activate();
  return kernels::cuda::fused_attention_description(shape_of(B, H, T, D, scale, input_dtype));
#else
  return "";
#endif
}

void fused_attention_forward(ExecutionContext& ctx, const float* qkv, void* qkv16_saved, float* stats_saved, float* y,
                             std::size_t B, std::size_t H, std::size_t T, std::size_t D, float scale,
                             DType input_dtype) {
  if (!ctx.on_device())
    throw UsageError(
        "tenax::ops::fused_attention_forward: runs on a CUDA execution context only; use attention_forward");
  const detail::OpScope profiled(
      ctx, detail::with_dtype(detail::op_key("fused_attention_forward", {B, H, T, D}), input_dtype),
      detail::causal_attention_flops(B, H, T, D));
#if TENAX_HAVE_CUDA
  ctx.activate();
  const auto shape = shape_of(B, H, T, D, scale, input_dtype);
  const Scratch s = scratch(B, H, T, D, false, kernels::cuda::fused_attention_forward_workspace_bytes(shape));
  const std::size_t head = B * H * T * D;
  if (head == 0) return;
  char* ws = static_cast<char*>(ctx.workspace(s.bytes));
  cast_from_f32(ctx, qkv, qkv16_saved, input_dtype, 3 * head);
  kernels::cuda::fused_attention_forward(shape, qkv16_saved, ws + s.y16, stats_saved, ws + s.cudnn, s.bytes - s.cudnn,
                                         ctx.stream());
  cast_to_f32(ctx, ws + s.y16, input_dtype, y, head);
#else
  (void)qkv, (void)qkv16_saved, (void)stats_saved, (void)y, (void)B, (void)H, (void)T, (void)D, (void)scale;
  (void)input_dtype;
#endif
}

void fused_attention_backward(ExecutionContext& ctx, const void* qkv16_saved, const float* stats_saved, const float* y,
                              const float* dy, float* dqkv, std::size_t B, std::size_t H, std::size_t T, std::size_t D,
                              float scale, DType input_dtype) {
  if (!ctx.on_device())
    throw UsageError(
        "tenax::ops::fused_attention_backward: runs on a CUDA execution context only; use attention_backward");
  const detail::OpScope profiled(
      ctx, detail::with_dtype(detail::op_key("fused_attention_backward", {B, H, T, D}), input_dtype),
      2 * detail::causal_attention_flops(B, H, T, D));
#if TENAX_HAVE_CUDA
  ctx.activate();
  const auto shape = shape_of(B, H, T, D, scale, input_dtype);
  const Scratch s = scratch(B, H, T, D, true, kernels::cuda::fused_attention_backward_workspace_bytes(shape));
  const std::size_t head = B * H * T * D;
  if (head == 0) return;
  char* ws = static_cast<char*>(ctx.workspace(s.bytes));
  cast_from_f32(ctx, y, ws + s.y16, input_dtype, head);
  cast_from_f32(ctx, dy, ws + s.dy16, input_dtype, head);
  kernels::cuda::fused_attention_backward(shape, qkv16_saved, ws + s.y16, ws + s.dy16, stats_saved, ws + s.dqkv16,
                                          ws + s.cudnn, s.bytes - s.cudnn, ctx.stream());
  cast_to_f32(ctx, ws + s.dqkv16, input_dtype, dqkv, 3 * head);
#else
  (void)qkv16_saved, (void)stats_saved, (void)y, (void)dy, (void)dqkv, (void)B, (void)H, (void)T, (void)D;
  (void)scale, (void)input_dtype;
#endif
}

}  // namespace tenax::ops
