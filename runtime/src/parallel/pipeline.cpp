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

unsigned char* PipelineChannel::wire_buffer(std::size_t bytes) {
  if (!ctx_.on_device()) {
    host_wire_.resize(bytes);
    return host_wire_.data();
  }
  if (device_wire_.nbytes() < bytes) {
    // The communicator may still read or write the old buffer: the compute stream waited for it, so this covers it.
    ctx_.synchronize();
    device_wire_ = Tensor();
    device_wire_ = ctx_.empty({static_cast<std::int64_t>(bytes)}, DType::U8);
  }
  return static_cast<unsigned char*>(device_wire_.data());
}

void PipelineChannel::reserve(std::size_t messages, std::size_t n) {
  if (wire_ == DType::F32 || messages == 0 || n == 0) return;  // fp32 messages travel from their own buffers
  wire_buffer(messages * ((n * dtype_size(wire_) + 63) / 64 * 64));
}

void PipelineChannel::exchange(const std::vector<PipelineMessage>& messages) {
  if (messages.empty()) return;
  const std::size_t esize = dtype_size(wire_);
  // Every message gets its own stretch of one wire buffer (64-byte aligned), packed before and unpacked after.
  std::vector<std::size_t> offset(messages.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    offset[i] = total;
    total += (messages[i].n * esize + 63) / 64 * 64;
  }
  unsigned char* wire = wire_ == DType::F32 ? nullptr : wire_buffer(total);
  transfers_.clear();
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const PipelineMessage& m = messages[i];
    void* buffer = m.data;
    if (wire != nullptr) {
      buffer = wire + offset[i];
      if (m.send) ops::cast_from_f32(ctx_, m.data, buffer, wire_, m.n);
    }
    transfers_.push_back(PeerTransfer{m.send, m.peer, buffer, m.n});
  }
  ctx_.before_communication(pp_);
  Work done = pp_.exchange(transfers_, wire_);
  // On a device the compute stream waits for the transfers (an event, below); the host waits only on the host, where
  // the received buffers are read next.
  if (!ctx_.on_device()) done.wait();
  ctx_.after_communication(pp_);
  if (wire != nullptr)
    for (std::size_t i = 0; i < messages.size(); ++i)
      if (!messages[i].send) ops::cast_to_f32(ctx_, wire + offset[i], wire_, messages[i].data, messages[i].n);
}

}  // namespace tenax
