#include "tenax/execution.hpp"

#include <array>
#include <cstring>
#include <string>

#include "tenax/build_config.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"
#include "tensor/op_profiler.hpp"

#if TENAX_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "core/check_cuda.hpp"
#include "tenax/kernels/gemm.hpp"
#include "tensor/device_wait.hpp"
#endif

namespace tenax {

#if TENAX_HAVE_CUDA

namespace {

cudaStream_t as_stream(void* s) {
  return static_cast<cudaStream_t>(s);
}

}  // namespace

// Events for the ordering with communicators, and a ring of pinned staging buffers for upload(): each slot's event
// marks when its previous copy left the buffer, so the host waits only when it runs kSlots uploads ahead of the GPU.
// The ring is allocated whole when the context is made: cudaMallocHost and cudaFreeHost synchronise the device, which
// must not happen inside a step while collectives of other communicators are in flight.
struct ExecutionContext::DeviceState {
  static constexpr std::size_t kSlots = 8;
  static constexpr std::size_t kMaxStagedBytes = std::size_t{4} << 20;  // per-step inputs (token ids) are far smaller
  struct Staging {
    void* pinned = nullptr;
    std::size_t capacity = 0;
    cudaEvent_t copied = nullptr;
    bool in_use = false;
  };
  cudaEvent_t compute_ready = nullptr;  // recorded on the compute stream before a communication
  cudaEvent_t comm_done = nullptr;      // recorded on a communicator's stream after it
  std::array<Staging, kSlots> staging{};
  std::size_t next_slot = 0;

  ~DeviceState() {
    // Best effort at destruction: the context synchronised its stream first, nothing is left to report to.
    for (Staging& s : staging) {
      if (s.pinned != nullptr) cudaFreeHost(s.pinned);
      if (s.copied != nullptr) cudaEventDestroy(s.copied);
    }
    if (compute_ready != nullptr) cudaEventDestroy(compute_ready);
    if (comm_done != nullptr) cudaEventDestroy(comm_done);
  }
};

#else

struct ExecutionContext::DeviceState {};

#endif

ExecutionContext& ExecutionContext::host() {
  static ExecutionContext host_context;
  return host_context;
}

int cuda_device_count() noexcept {
#if TENAX_HAVE_CUDA
  int count = 0;
  // Without a driver this fails (cudaErrorInsufficientDriver / cudaErrorNoDevice) and leaves count unwritten; clear the
  // error so it does not surface in an unrelated later check.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

std::unique_ptr<ExecutionContext> ExecutionContext::cuda(int device) {
#if TENAX_HAVE_CUDA
  const int count = cuda_device_count();
  if (count == 0)
    throw UsageError(
        "device cuda: this machine has no usable CUDA device (no GPU, or no NVIDIA driver); run with the CPU "
        "(--device cpu) or on a node with a GPU");
  if (device < 0 || device >= count)
    throw UsageError("device cuda: device index " + std::to_string(device) + " is outside the " +
                     std::to_string(count) + " CUDA device(s) this process sees (check CUDA_VISIBLE_DEVICES)");
  std::unique_ptr<ExecutionContext> ctx(new ExecutionContext());
  ctx->device_ = Device::Cuda;
  ctx->device_index_ = device;
  ctx->state_ = std::make_unique<DeviceState>();
  TENAX_CHECK_CUDA(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  // Non-blocking: the compute stream never waits for (or blocks) work other libraries put on the legacy stream.
  TENAX_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ctx->stream_ = stream;
  ctx->blas_ = kernels::cuda::create_blas_handle();
  // Timing is not needed: events without it are the cheapest to record and wait on.
  TENAX_CHECK_CUDA(cudaEventCreateWithFlags(&ctx->state_->compute_ready, cudaEventDisableTiming));
  TENAX_CHECK_CUDA(cudaEventCreateWithFlags(&ctx->state_->comm_done, cudaEventDisableTiming));
  for (DeviceState::Staging& s : ctx->state_->staging) {
    TENAX_CHECK_CUDA(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
    TENAX_CHECK_CUDA(cudaMallocHost(&s.pinned, DeviceState::kMaxStagedBytes));
    s.capacity = DeviceState::kMaxStagedBytes;
  }
  TENAX_LOG(Info, "device") << "execution context on cuda:" << device;
  return ctx;
#else
  (void)device;
  throw UsageError(
      "device cuda: this build of tenax has no CUDA support; use the CPU (--device cpu) or rebuild with the CUDA "
      "toolkit installed (-DTENAX_WITH_CUDA=ON)");
#endif
}

ExecutionContext::~ExecutionContext() {
#if TENAX_HAVE_CUDA
  if (device_ == Device::Cuda) {
    // A destructor cannot report, and the buffers below must not be freed under running kernels; but a stream stuck
    // behind a dead peer's collective must not hang the exit either: a bounded wait, then the buffers are left.
    cudaSetDevice(device_index_);
    try {
      detail::wait_for_stream(stream_, "the shutdown of " + describe());
    } catch (const std::exception& e) {
      TENAX_LOG(Warn, "device") << e.what() << "; its memory is not freed";
      return;
    }
    if (workspace_ != nullptr) cudaFreeAsync(workspace_, as_stream(stream_));
    cudaStreamSynchronize(as_stream(stream_));
    state_.reset();
    kernels::cuda::destroy_blas_handle(blas_);
    cudaStreamDestroy(as_stream(stream_));
  }
#endif
}

std::string ExecutionContext::describe() const {
  return on_device() ? "cuda:" + std::to_string(device_index_) : std::string("host");
}

std::string ExecutionContext::device_uuid() const {
  if (!on_device()) return "";
#if TENAX_HAVE_CUDA
  cudaDeviceProp props{};
  TENAX_CHECK_CUDA(cudaGetDeviceProperties(&props, device_index_));
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (char byte : props.uuid.bytes) {
    const auto b = static_cast<unsigned char>(byte);
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
#else
  return "";
#endif
}

void ExecutionContext::activate() const {
#if TENAX_HAVE_CUDA
  if (on_device()) TENAX_CHECK_CUDA(cudaSetDevice(device_index_));
#endif
}

void ExecutionContext::synchronize() const {
#if TENAX_HAVE_CUDA
  if (on_device()) {
    activate();
    detail::wait_for_stream(stream_, "synchronize of " + describe());
  }
#endif
}

Tensor ExecutionContext::empty(Shape shape, DType dtype) const {
  activate();
  return Tensor::empty(std::move(shape), dtype, device_);
}

Tensor ExecutionContext::zeros(Shape shape, DType dtype) const {
  Tensor t = empty(std::move(shape), dtype);
  // Host memory comes zeroed from Tensor::empty; device memory is zeroed in stream order.
  if (on_device()) zero(t.data(), t.nbytes());
  return t;
}

void ExecutionContext::zero(void* data, std::size_t bytes) const {
  if (bytes == 0) return;
  const detail::OpScope profiled(*this, detail::op_key("zero", {bytes}), 0, static_cast<double>(bytes));
  if (!on_device()) {
    std::memset(data, 0, bytes);
    return;
  }
#if TENAX_HAVE_CUDA
  activate();
  TENAX_CHECK_CUDA(cudaMemsetAsync(data, 0, bytes, as_stream(stream_)));
#endif
}

void ExecutionContext::copy(void* dst, const void* src, std::size_t bytes) const {
  if (bytes == 0 || dst == src) return;
  const detail::OpScope profiled(*this, detail::op_key("copy", {bytes}), 0, 2.0 * static_cast<double>(bytes));
  if (!on_device()) {
    std::memmove(dst, src, bytes);
    return;
  }
#if TENAX_HAVE_CUDA
  activate();
  const auto* d = static_cast<const unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  // cudaMemcpyAsync's result is undefined for overlapping ranges (the host path's memmove is not): refuse them.
  if (d < s + bytes && s < d + bytes)
    throw UsageError("copy on " + describe() + ": the source and destination ranges overlap (" + std::to_string(bytes) +
                     " bytes); copy through a separate buffer");
  TENAX_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_stream(stream_)));
#endif
}

void ExecutionContext::upload(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  const detail::OpScope profiled(*this, detail::op_key("upload", {bytes}), 0, static_cast<double>(bytes));
  if (!on_device()) {
    std::memmove(dst, host_src, bytes);
    return;
  }
#if TENAX_HAVE_CUDA
  activate();
  if (bytes > DeviceState::kMaxStagedBytes) {
    // Large copies (initial parameters, a restored state) are rare: copy directly and wait, instead of keeping pinned
    // staging memory of their size for the context's lifetime.
    TENAX_CHECK_CUDA(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, as_stream(stream_)));
    detail::wait_for_stream(stream_, "upload of " + std::to_string(bytes) + " bytes to " + describe());
    return;
  }
  DeviceState::Staging& s = state_->staging[state_->next_slot];
  state_->next_slot = (state_->next_slot + 1) % DeviceState::kSlots;
  // The slot's previous copy must have read the buffer before it is overwritten.
  if (s.in_use) detail::wait_for_event(s.copied, "upload to " + describe() + " (staging ring)");
  std::memcpy(s.pinned, host_src, bytes);
  TENAX_CHECK_CUDA(cudaMemcpyAsync(dst, s.pinned, bytes, cudaMemcpyHostToDevice, as_stream(stream_)));
  TENAX_CHECK_CUDA(cudaEventRecord(s.copied, as_stream(stream_)));
  s.in_use = true;
#endif
}

void ExecutionContext::download(void* host_dst, const void* src, std::size_t bytes) const {
  if (bytes == 0) return;
  if (!on_device()) {
    std::memmove(host_dst, src, bytes);
    return;
  }
#if TENAX_HAVE_CUDA
  activate();
  TENAX_CHECK_CUDA(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, as_stream(stream_)));
  detail::wait_for_stream(stream_, "download of " + std::to_string(bytes) + " bytes from " + describe());
#endif
}

void* ExecutionContext::workspace(std::size_t bytes) {
  if (workspace_bytes_ >= bytes) return workspace_;
  // Grown by half again as much, so a sequence of slightly larger requests does not reallocate every time.
  const std::size_t grown = bytes + bytes / 2;
  if (!on_device()) {
    host_workspace_.resize(grown);
    workspace_ = host_workspace_.data();
    workspace_bytes_ = grown;
    return workspace_;
  }
#if TENAX_HAVE_CUDA
  // Stream-ordered: the old block is freed after the kernels queued before it, the new one allocated in order, and
  // neither synchronises the device (cudaMalloc/cudaFree would, in the middle of a step, while collectives of other
  // communicators are in flight).
  activate();
  if (workspace_ != nullptr) TENAX_CHECK_CUDA(cudaFreeAsync(workspace_, as_stream(stream_)));
  workspace_ = nullptr;
  workspace_bytes_ = 0;
  TENAX_CHECK_CUDA(cudaMallocAsync(&workspace_, grown, as_stream(stream_)));
  workspace_bytes_ = grown;
#endif
  return workspace_;
}

void ExecutionContext::begin_op_profile() {
  profiler_.reset();
  activate();
  profiler_ = std::make_unique<detail::OpProfiler>(stream_);
}

OpProfile ExecutionContext::end_op_profile() {
  if (profiler_ == nullptr)
    throw UsageError("end_op_profile on " + describe() + ": no op profile is running (call begin_op_profile first)");
  const std::unique_ptr<detail::OpProfiler> profiler = std::move(profiler_);
  activate();
  return profiler->finish();
}

void ExecutionContext::discard_op_profile() noexcept {
  profiler_.reset();
}

void ExecutionContext::check_reachable(const Communicator& comm) const {
  if (on_device() && comm.backend() != Backend::Nccl && comm.size() > 1)
    throw UsageError("group '" + comm.name() + "' uses the " + std::string(backend_name(comm.backend())) +
                     " backend, which cannot read device memory; a " + describe() +
                     " context needs NCCL communicators (make_nccl_communicator)");
}

void ExecutionContext::before_communication(Communicator& comm) {
  check_reachable(comm);
  if (!on_device()) return;
#if TENAX_HAVE_CUDA
  activate();
  void* comm_stream = comm.cuda_stream();
  if (comm_stream == nullptr) {
    // No stream to order against: the data must be complete before the communicator reads it.
    synchronize();
    return;
  }
  TENAX_CHECK_CUDA(cudaEventRecord(state_->compute_ready, as_stream(stream_)));
  // The wait captures the event's state now; recording it again later does not affect this wait.
  TENAX_CHECK_CUDA(cudaStreamWaitEvent(as_stream(comm_stream), state_->compute_ready, 0));
#endif
}

void ExecutionContext::after_communication(Communicator& comm) {
  check_reachable(comm);
  if (!on_device()) return;
#if TENAX_HAVE_CUDA
  activate();
  void* comm_stream = comm.cuda_stream();
  if (comm_stream == nullptr) {
    comm.synchronize();
    return;
  }
  TENAX_CHECK_CUDA(cudaEventRecord(state_->comm_done, as_stream(comm_stream)));
  TENAX_CHECK_CUDA(cudaStreamWaitEvent(as_stream(stream_), state_->comm_done, 0));
#endif
}

void ExecutionContext::copy_after_communication(Communicator& comm, void* dst, const void* src, std::size_t bytes) {
  check_reachable(comm);
  void* comm_stream = on_device() ? comm.cuda_stream() : nullptr;
  if (comm_stream == nullptr) {
    // Host memory, or no stream to order against: the collective must be complete before the compute stream copies.
    if (on_device()) comm.synchronize();
    copy(dst, src, bytes);
    return;
  }
#if TENAX_HAVE_CUDA
  if (bytes == 0 || dst == src) return;
  activate();
  TENAX_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_stream(comm_stream)));
#endif
}

}  // namespace tenax
