// Fused optimizer steps on fp32 master weights. Each reads the gradient and the optimizer state once, writes the new
// state and master weights, and (when asked) the low-precision copy of the new weights used by the next forward pass,
// all in one pass over memory.
#pragma once

#include <cstddef>

#include "tenax/kernels/config.hpp"
#include "tenax/dtype.hpp"

namespace tenax::kernels {

// AdamW with decoupled weight decay (Loshchilov & Hutter; the PyTorch torch.optim.AdamW update):
//   w *= 1 - lr*wd;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;
//   w -= (lr / (1 - b1^step)) * m / (sqrt(v / (1 - b2^step)) + eps)
struct AdamWParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
  long step = 1;  // 1-based step count used for the bias correction
};

// SGD with momentum (the PyTorch torch.optim.SGD update, dampening 0); the velocity buffer starts zeroed:
//   g += wd*w;  vel = momentum*vel + g;  w -= lr * (nesterov ? g + momentum*vel : vel)
struct SgdParams {
  float lr = 1e-2f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

namespace cpu {
// Updates master, m and v (n elements each) in place from grad. If lowp_out is not null it receives the new master
// weights rounded to lowp_type (F32, BF16 or F16; 16-bit types as raw bits). Throws UsageError for step < 1, a beta
// outside [0, 1), eps <= 0 or an unsupported lowp_type.
void adamw_step(float* master, float* m, float* v, const float* grad, void* lowp_out, DType lowp_type, std::size_t n,
                const AdamWParams& p);
// Updates master and velocity in place from grad; lowp_out as for adamw_step. velocity may be null only when
// momentum == 0. Throws UsageError for a negative momentum, nesterov without momentum or an unsupported lowp_type.
void sgd_momentum_step(float* master, float* velocity, const float* grad, void* lowp_out, DType lowp_type,
                       std::size_t n, const SgdParams& p);
}  // namespace cpu

#if TENAX_HAVE_CUDA
namespace cuda {
// As the cpu:: versions on device pointers; asynchronous on `stream`. Same validation (thrown before any launch).
void adamw_step(float* master, float* m, float* v, const float* grad, void* lowp_out, DType lowp_type, std::size_t n,
                const AdamWParams& p, void* stream);
void sgd_momentum_step(float* master, float* velocity, const float* grad, void* lowp_out, DType lowp_type,
                       std::size_t n, const SgdParams& p, void* stream);
}  // namespace cuda
#endif

}  // namespace tenax::kernels
