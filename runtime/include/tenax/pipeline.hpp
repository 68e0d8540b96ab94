// Point-to-point exchange between neighbouring pipeline stages, carrying activations forward and their gradients
// backward, one method per PipelineOp communication action (tenax/pipeline_schedule.hpp).
//
// The stage index is the rank in the pp communicator (ProcessGroups orders it so). Tensors are fp32 on the caller's
// side; on the wire they travel in `wire_dtype` (the precision policy's parameter dtype: bf16/fp16 halve the bytes; the
// values were already rounded to it at the layer boundary, so the conversion loses nothing). Each method blocks until
// its transfers are done; paired methods use Communicator::send_recv so that two neighbours exchanging at the same time
// never wait on each other. Both neighbours must execute matching actions in the same order, which the schedules
// guarantee.
//
// On a device execution context the tensors are device memory, the pp communicator is an NCCL one, and "blocks" means
// stream order: the transfers are enqueued on the communicator's stream after the compute stream's queued work, and the
// compute stream waits for them (events), so later kernels see the received data without the host waiting.
#pragma once

#include <cstddef>
#include <vector>

#include "tenax/communicator.hpp"
#include "tenax/dtype.hpp"
#include "tenax/execution.hpp"
#include "tenax/tensor.hpp"

namespace tenax {

class PipelineChannel {
 public:
  // Throws UsageError for a wire dtype other than F32, BF16 or F16.
  PipelineChannel(Communicator& pp, DType wire_dtype, ExecutionContext& context = ExecutionContext::host());

  int stage() const { return pp_.rank(); }
  int stages() const { return pp_.size(); }
  bool is_first() const { return stage() == 0; }
  bool is_last() const { return stage() == stages() - 1; }

  void recv_forward(float* activation, std::size_t n);
  void send_forward(const float* activation, std::size_t n);
  void recv_backward(float* grad, std::size_t n);
  void send_backward(const float* grad, std::size_t n);
  void send_forward_recv_backward(const float* activation, float* grad, std::size_t n);
  void send_backward_recv_forward(const float* grad, float* activation, std::size_t n);

 private:
  void exchange(const float* send, int dst, float* recv, int src, std::size_t n);
  const void* pack(const float* values, std::size_t n);
  void unpack(float* values, std::size_t n);
  // A wire buffer of at least `bytes` (host vector on the host, device tensor on a device).
  unsigned char* wire_buffer(int which, std::size_t bytes);

  Communicator& pp_;
  DType wire_;
  ExecutionContext& ctx_;
  std::vector<unsigned char> send_wire_;
  std::vector<unsigned char> recv_wire_;
  Tensor device_wire_[2];  // send, receive (device contexts)
};

}  // namespace tenax
