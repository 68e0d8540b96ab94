// cuDNN's fused flash attention for the causal self-attention core: one kernel for the forward and one for the
// backward, reading the packed QKV projection output and writing the merged output directly, with no B*H*T*T matrix
// in memory (the batched core of attention.hpp holds P and dP). 16-bit inputs (bf16 or fp16) with fp32 softmax and
// accumulation inside the kernels.
//
// Layouts (attention.hpp's convention, in 16-bit elements):
//   qkv16   [B*T, 3*H*D], head-major: head h's q, k, v at columns 3hD, 3hD + D, 3hD + 2D
//   y16     [B*T, H*D], head h at columns hD (the input of the output projection)
//   stats   [B, H, T] floats: each query row's log-sum-exp of its scaled, masked scores (what the backward needs
//           instead of P)
//
// cuDNN is opened (dlopen) on first use, like cuBLAS (cublas_library.hpp says why), and the frontend's graphs are
// built once per thread, device and problem and then reused. Building a graph needs the GPU: whether a problem can
// run fused is known only on the machine that runs it, so callers ask fused_attention_unsupported() first and use the
// batched core when it gives a reason.
//
// Determinism: the backward is built with cuDNN's deterministic algorithm where the engine offers it; whether it did
// is in fused_attention_description().
#pragma once

#include <cstddef>
#include <string>

#include "tenax/dtype.hpp"
#include "tenax/kernels/config.hpp"

namespace tenax::kernels::cuda {

#if TENAX_HAVE_CUDA

struct FusedAttentionShape {
  std::size_t B = 0, H = 0, T = 0, D = 0;
  DType dtype = DType::BF16;  // BF16 or F16
  float scale = 1.0f;         // usually 1/sqrt(D)
};

// "" when cuDNN's fused attention runs this problem on the current device; otherwise why not (built without cuDNN's
// frontend, cuDNN 9 cannot be opened, no cuDNN handle on this device, an fp32 dtype, a head size that is not a multiple
// of 8, no engine for it on this GPU, ...). Builds (and caches, per thread) both graphs, so the first call per problem
// costs more than the later ones (how much was not measured). Never throws for an unsupported problem; UsageError for
// sizes that overflow (attention_dims); DeviceError if no device is usable.
std::string fused_attention_unsupported(const FusedAttentionShape& shape);
// One line naming the cuDNN version opened and whether the backward is deterministic, for logs ("" if unsupported).
std::string fused_attention_description(const FusedAttentionShape& shape);

// Device workspace each call needs (256-byte aligned, ordered on the call's stream). Throws DeviceError when the
// problem is unsupported (ask fused_attention_unsupported first).
std::size_t fused_attention_forward_workspace_bytes(const FusedAttentionShape& shape);
std::size_t fused_attention_backward_workspace_bytes(const FusedAttentionShape& shape);

// y16 = softmax(scale * q k^T, causal) v per sequence and head; stats receives each row's log-sum-exp. Asynchronous on
// `stream`. Every pointer 16-byte aligned.
void fused_attention_forward(const FusedAttentionShape& shape, const void* qkv16, void* y16, float* stats,
                             void* workspace, std::size_t workspace_bytes, void* stream);
// The gradients of the forward above into dqkv16 (written, same packed layout) from dy16, given the forward's qkv16,
// its output y16 and its stats.
void fused_attention_backward(const FusedAttentionShape& shape, const void* qkv16, const void* y16, const void* dy16,
                              const float* stats, void* dqkv16, void* workspace, std::size_t workspace_bytes,
                              void* stream);

#endif

}  // namespace tenax::kernels::cuda
