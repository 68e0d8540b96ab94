#include "tenax/pipeline.hpp"

#include <string>

#include "tenax/error.hpp"
#include "tenax/kernels/cast.hpp"

namespace tenax {

PipelineChannel::PipelineChannel(Communicator& pp, DType wire_dtype) : pp_(pp), wire_(wire_dtype) {
  if (wire_ != DType::F32 && wire_ != DType::BF16 && wire_ != DType::F16)
    throw UsageError("pipeline: activations travel as f32, bf16 or f16, not " + std::string(dtype_name(wire_)));
}

const void* PipelineChannel::pack(const float* values, std::size_t n) {
  if (wire_ == DType::F32) return values;
  send_wire_.resize(n * dtype_size(wire_));
  kernels::cpu::cast_from_f32(values, send_wire_.data(), wire_, n);
  return send_wire_.data();
}

void PipelineChannel::unpack(float* values, std::size_t n) {
  if (wire_ != DType::F32) kernels::cpu::cast_to_f32(recv_wire_.data(), wire_, values, n);
}

void PipelineChannel::exchange(const float* send, int dst, float* recv, int src, std::size_t n) {
  void* recv_buffer = recv;
  if (recv != nullptr && wire_ != DType::F32) {
    recv_wire_.resize(n * dtype_size(wire_));
    recv_buffer = recv_wire_.data();
  }
  const void* send_buffer = send != nullptr ? pack(send, n) : nullptr;
  if (send != nullptr && recv != nullptr) {
    pp_.send_recv(send_buffer, n, dst, recv_buffer, n, src, wire_);
  } else if (send != nullptr) {
    pp_.send(send_buffer, n, wire_, dst);
  } else {
    pp_.recv(recv_buffer, n, wire_, src);
  }
  if (recv != nullptr) unpack(recv, n);
}

void PipelineChannel::recv_forward(float* activation, std::size_t n) {
  exchange(nullptr, -1, activation, stage() - 1, n);
}
void PipelineChannel::send_forward(const float* activation, std::size_t n) {
  exchange(activation, stage() + 1, nullptr, -1, n);
}
void PipelineChannel::recv_backward(float* grad, std::size_t n) {
  exchange(nullptr, -1, grad, stage() + 1, n);
}
void PipelineChannel::send_backward(const float* grad, std::size_t n) {
  exchange(grad, stage() - 1, nullptr, -1, n);
}
void PipelineChannel::send_forward_recv_backward(const float* activation, float* grad, std::size_t n) {
  exchange(activation, stage() + 1, grad, stage() + 1, n);
}
void PipelineChannel::send_backward_recv_forward(const float* grad, float* activation, std::size_t n) {
  exchange(grad, stage() - 1, activation, stage() - 1, n);
}

}  // namespace tenax
