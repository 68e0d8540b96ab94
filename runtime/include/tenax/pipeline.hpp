// Point-to-point exchange between pipeline stages, carrying activations forward and their gradients backward: one
// exchange() per exchange step of a pipeline program (tenax/pipeline_program.hpp).
//
// The stage index is the rank in the pp communicator (ProcessGroups orders it so). Tensors are fp32 on the caller's
// side; on the wire they travel in `wire_dtype` (the precision policy's parameter dtype: bf16/fp16 halve the bytes; the
// values were already rounded to it at the layer boundary, so the conversion loses nothing). exchange() posts all its
// transfers at once and blocks until they are done (Communicator::exchange), so two stages exchanging in both
// directions never wait on each other. Both sides must list matching transfers in the same order, which the programs
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

// One tensor of a batched exchange: sent to or received from the pipeline stage `peer`.
struct PipelineMessage {
  bool send = true;
  int peer = 0;
  float* data = nullptr;  // n floats in the context's memory (read by a send, written by a receive)
  std::size_t n = 0;
};

class PipelineChannel {
 public:
  // Throws UsageError for a wire dtype other than F32, BF16 or F16.
  PipelineChannel(Communicator& pp, DType wire_dtype, ExecutionContext& context = ExecutionContext::host());

  int stage() const { return pp_.rank(); }
  int stages() const { return pp_.size(); }
  bool is_first() const { return stage() == 0; }
  bool is_last() const { return stage() == stages() - 1; }

  // Sizes the wire buffer for exchanges of up to `messages` messages of `n` floats each, now: growing it later, in the
  // middle of a step, would synchronise the device while collectives of other communicators are in flight.
  void reserve(std::size_t messages, std::size_t n);
  // Posts every message at once and returns when all completed (Communicator::exchange): a pipeline program's
  // exchange step (tenax/pipeline_program.hpp), which may talk to both neighbours in both directions.
  void exchange(const std::vector<PipelineMessage>& messages);

 private:
  // A wire buffer of at least `bytes` (host vector on the host, device tensor on a device).
  unsigned char* wire_buffer(std::size_t bytes);

  Communicator& pp_;
  DType wire_;
  ExecutionContext& ctx_;
  std::vector<unsigned char> host_wire_;
  Tensor device_wire_;
  std::vector<PeerTransfer> transfers_;
};

}  // namespace tenax
