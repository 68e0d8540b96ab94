#include "tenax/pipeline.hpp"

#include <string>

#include "tenax/error.hpp"
#include "tenax/ops.hpp"

namespace tenax {

PipelineChannel::PipelineChannel(Communicator& pp, DType wire_dtype, ExecutionContext& context)
    : pp_(pp), wire_(wire_dtype), ctx_(context) {
  if (wire_ != DType::F32 && wire_ != DType::BF16 && wire_ != DType::F16)
    throw UsageError("pipeline: activations travel as f32, bf16 or f16, not " + std::string(dtype_name(wire_)));
}

unsigned char* PipelineChannel::wire_buffer(int which, std::size_t bytes) {
  if (!ctx_.on_device()) {
    std::vector<unsigned char>& v = which == 0 ? send_wire_ : recv_wire_;
    v.resize(bytes);
    return v.data();
  }
  Tensor& t = device_wire_[which];
  if (t.nbytes() < bytes) {
    // The communicator may still read or write the old buffer: the compute stream waited for it, so this covers it.
    ctx_.synchronize();
    t = Tensor();
    t = ctx_.empty({static_cast<std::int64_t>(bytes)}, DType::U8);
  }
  return static_cast<unsigned char*>(t.data());
}

const void* PipelineChannel::pack(const float* values, std::size_t n) {
  if (wire_ == DType::F32) return values;
  unsigned char* wire = wire_buffer(0, n * dtype_size(wire_));
  ops::cast_from_f32(ctx_, values, wire, wire_, n);
  return wire;
}

void PipelineChannel::unpack(float* values, std::size_t n) {
  if (wire_ != DType::F32) ops::cast_to_f32(ctx_, wire_buffer(1, n * dtype_size(wire_)), wire_, values, n);
}

void PipelineChannel::exchange(const float* send, int dst, float* recv, int src, std::size_t n) {
  void* recv_buffer = recv;
  if (recv != nullptr && wire_ != DType::F32) recv_buffer = wire_buffer(1, n * dtype_size(wire_));
  const void* send_buffer = send != nullptr ? pack(send, n) : nullptr;
  ctx_.before_communication(pp_);
  if (send != nullptr && recv != nullptr) {
    pp_.send_recv(send_buffer, n, dst, recv_buffer, n, src, wire_);
  } else if (send != nullptr) {
    pp_.send(send_buffer, n, wire_, dst);
  } else {
    pp_.recv(recv_buffer, n, wire_, src);
  }
  ctx_.after_communication(pp_);
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
