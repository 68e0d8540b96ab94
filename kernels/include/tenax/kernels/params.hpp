// The kernels' public types: the arguments a program passes through tenax's one dispatch API (tenax/ops.hpp,
// tenax/optimizer.hpp). The kernels themselves (kernels::cpu::, kernels::cuda::) are the library's internals; this
// header is all of the kernels library that is installed, and it is the same in every build (with or without CUDA).
#pragma once

namespace tenax::kernels {

// Whether a matrix operand of a product is used as stored or transposed.
enum class Trans { No, Yes };

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

}  // namespace tenax::kernels
