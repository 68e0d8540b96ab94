// ExecutionContext: where a model's tensors live and where its work runs. Layers, parameter buffers, the optimizer and
// the loss take one at construction (or find it through the ParameterBuffers they bind to) and dispatch every kernel on
// it (tenax/ops.hpp), so a model is written once for both places:
//
//   host     host memory, the CPU reference kernels (OpenBLAS for matrix products); every call completes before it
//            returns. ExecutionContext::host() is the process-wide host context.
//   cuda     one CUDA device, one compute stream (non-blocking with respect to the legacy default stream) and
//            one cuBLAS handle bound to it, created once by ExecutionContext::cuda(device). Kernels are enqueued on
//            the stream and return at once; results are read through download(), which waits.
//
// Stream contract: all work of a context is ordered on its one compute stream. Communication on a device context goes
// through NCCL communicators, whose operations run on the communicator's own stream: before_communication(comm)
// orders the communicator's stream after everything queued on the compute stream so far, after_communication(comm)
// makes the compute stream wait for everything queued on the communicator so far. Both use CUDA events (no host
// synchronisation) when the communicator exposes its stream (Communicator::cuda_stream), and fall back to host
// synchronisation otherwise. On the host both are no-ops (host collectives complete before they return).
//
// A context is used by one thread at a time (its stream, cuBLAS handle and workspace are not locked).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tenax/communicator.hpp"
#include "tenax/op_profile.hpp"
#include "tenax/tensor.hpp"

namespace tenax {

namespace detail {
class OpProfiler;
}

class ExecutionContext {
 public:
  // The process-wide host context.
  static ExecutionContext& host();
  // A context on CUDA device `device` (its own stream and cuBLAS handle). Throws UsageError naming the fix in a build
  // without CUDA, on a machine without a usable device, or for a device index outside [0, cuda_device_count()).
  static std::unique_ptr<ExecutionContext> cuda(int device);

  ~ExecutionContext();
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;

  Device device() const { return device_; }
  bool on_device() const { return device_ == Device::Cuda; }
  int device_index() const { return device_index_; }  // -1 on the host
  void* stream() const { return stream_; }            // cudaStream_t; null on the host
  void* blas_handle() const { return blas_; }         // cublasHandle_t bound to stream(); null on the host
  std::string describe() const;                       // "host" or "cuda:<index>"

  // Makes this context's device current on the calling thread (every method below does it itself; kernels launched
  // directly through tenax::kernels::cuda need it). No-op on the host.
  void activate() const;
  // Waits until everything queued on the compute stream has finished. No-op on the host. Every host wait of a device
  // context (this, download, the upload ring) is bounded: it gives up with CommError once any communicator of the
  // process failed (all are then aborted), and with TimeoutError after TENAX_COMM_TIMEOUT.
  void synchronize() const;

  // Tensors in this context's memory. zeros() is ordered on the compute stream like every other write.
  Tensor empty(Shape shape, DType dtype) const;
  Tensor zeros(Shape shape, DType dtype) const;

  // Memory operations on this context's memory, ordered on the compute stream. copy() of overlapping ranges is a
  // memmove on the host and a UsageError on a device (where the copy engine's result would be undefined).
  void zero(void* data, std::size_t bytes) const;
  void copy(void* dst, const void* src, std::size_t bytes) const;
  // Host memory -> this context's memory. `host_src` may be reused as soon as the call returns: copies of up to 4 MiB
  // go through a ring of pinned staging buffers (the host does not wait for the compute stream to drain unless it runs
  // 8 uploads ahead of it), larger ones wait for the stream.
  void upload(void* dst, const void* host_src, std::size_t bytes);
  // This context's memory -> host memory; returns once the bytes are there (waits for the work queued before it).
  void download(void* host_dst, const void* src, std::size_t bytes) const;

  // Scratch memory of at least `bytes` in this context's memory, valid until the next workspace() call. Reuse is safe
  // because every user of it is ordered on the one compute stream. Device contexts only in practice: the host context
  // is shared by the whole process, so host code uses its own scratch (tenax::ops does).
  void* workspace(std::size_t bytes);

  // The device's UUID as 32 hex digits (two contexts on the same physical GPU have the same one, whatever
  // CUDA_VISIBLE_DEVICES renumbered); "" on the host.
  std::string device_uuid() const;

  // See the stream contract above. `comm` must be able to reach this context's memory: an NCCL communicator for a
  // device context (UsageError for an MPI communicator of more than one rank, which cannot read device memory).
  void before_communication(Communicator& comm);
  void after_communication(Communicator& comm);
  // Copies device memory on `comm`'s stream, after its queued operations (a ZeRO reduce-scatter's result moved into
  // place without making the compute stream wait). Synchronous fallback when the communicator has no stream.
  void copy_after_communication(Communicator& comm, void* dst, const void* src, std::size_t bytes);

  // The op profile (tenax/op_profile.hpp): begin_op_profile() starts timing every tenax::ops call on this context
  // (discarding a profile already running); end_op_profile() waits for the work queued so far, stops, and returns the
  // rows (UsageError if none is running; DeviceError if a timing event failed).
  void begin_op_profile();
  OpProfile end_op_profile();
  void discard_op_profile() noexcept;  // stops a running profile without waiting for anything; no-op if none
  detail::OpProfiler* op_profiler() const { return profiler_.get(); }  // null when not profiling

 private:
  ExecutionContext() = default;
  void check_reachable(const Communicator& comm) const;

  struct DeviceState;  // events and staging buffers (CUDA builds only)

  Device device_ = Device::Host;
  int device_index_ = -1;
  void* stream_ = nullptr;
  void* blas_ = nullptr;
  std::unique_ptr<DeviceState> state_;
  void* workspace_ = nullptr;  // device: stream-ordered allocation; host: host_workspace_
  std::size_t workspace_bytes_ = 0;
  std::vector<unsigned char> host_workspace_;
  std::unique_ptr<detail::OpProfiler> profiler_;
};

// Number of CUDA devices this process can use: 0 in a build without CUDA and on a machine without a driver or GPU.
// Never throws.
int cuda_device_count() noexcept;

}  // namespace tenax
