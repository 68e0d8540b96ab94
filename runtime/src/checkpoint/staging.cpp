#include "checkpoint/staging.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/host_memory.hpp"
#include "tenax/build_config.hpp"
#include "tenax/error.hpp"

#if TENAX_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tenax::ckpt {

StagingArena::~StagingArena() {
  if (pinned_) unpin_host_memory(data_);
  if (data_) {
    ::munmap(data_, mapped_);
    detail::release_host_memory(mapped_);
  }
}

void StagingArena::allocate(std::size_t bytes, bool pin) {
  if (data_ != nullptr) throw std::logic_error("StagingArena::allocate: the arena is allocated once");
  if (bytes == 0) return;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t mapped = (bytes + page - 1) / page * page;
  // Charged like a host tensor: a model whose staging copy does not fit beside it is refused by name while the engine
  // builds it (core/host_memory.hpp).
  detail::charge_host_memory(mapped);
  mapped_ = mapped;
  void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    detail::release_host_memory(mapped_);
    mapped_ = 0;
    throw IoError("checkpoint staging: cannot map " + std::to_string(mapped) + " bytes: " + std::strerror(err) +
                  " (the staging buffer holds everything this rank writes per checkpoint)");
  }
  // One write per page faults every page in now instead of during the first save.
  auto* bytes_at = static_cast<std::uint8_t*>(p);
  for (std::size_t off = 0; off < mapped_; off += page)
    bytes_at[off] = 0;
  if (pin) {
    try {
      pin_host_memory(bytes_at, mapped_);
    } catch (...) {
      ::munmap(p, mapped_);  // no buffer rather than an unpinned one the device copies would silently slow down on
      detail::release_host_memory(mapped_);
      mapped_ = 0;
      throw;
    }
    pinned_ = true;
  }
  data_ = bytes_at;
  size_ = bytes;
}

#if TENAX_HAVE_CUDA
namespace {
void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess)
    throw DeviceError(std::string("checkpoint: ") + what + " failed: " + cudaGetErrorName(rc) + ": " +
                      cudaGetErrorString(rc));
}
}  // namespace

void pin_host_memory(void* p, std::size_t bytes) {
  check_cuda(cudaHostRegister(p, bytes, cudaHostRegisterDefault), "cudaHostRegister of the staging buffer");
}
void unpin_host_memory(void* p) {
  cudaHostUnregister(p);
}
void copy_device_to_host_async(void* dst, const void* src, std::size_t bytes, void* stream) {
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream)),
             "cudaMemcpyAsync (device to staging)");
}
void copy_host_to_device(void* dst, const void* src, std::size_t bytes, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync (checkpoint to device)");
  check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize (checkpoint to device)");
}
int current_device() {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}
void use_device(int device) {
  check_cuda(cudaSetDevice(device), "cudaSetDevice (checkpoint I/O thread)");
}
DeviceCopyFence::DeviceCopyFence() {
  cudaEvent_t e;
  check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  event_ = e;
}
DeviceCopyFence::~DeviceCopyFence() {
  cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}
void DeviceCopyFence::record(void* stream) {
  check_cuda(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)), "cudaEventRecord");
}
void DeviceCopyFence::wait() {
  check_cuda(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "cudaEventSynchronize (staging copies)");
}
#else
namespace {
[[noreturn]] void no_cuda() {
  throw UsageError("checkpoint: a device-memory shard needs a tenax built with CUDA (TENAX_WITH_CUDA=ON)");
}
}  // namespace
void pin_host_memory(void*, std::size_t) {
  no_cuda();
}
void unpin_host_memory(void*) {}
void copy_device_to_host_async(void*, const void*, std::size_t, void*) {
  no_cuda();
}
void copy_host_to_device(void*, const void*, std::size_t, void*) {
  no_cuda();
}
int current_device() {
  no_cuda();
}
void use_device(int) {
  no_cuda();
}
DeviceCopyFence::DeviceCopyFence() {
  no_cuda();
}
DeviceCopyFence::~DeviceCopyFence() = default;
void DeviceCopyFence::record(void*) {
  no_cuda();
}
void DeviceCopyFence::wait() {
  no_cuda();
}
#endif

}  // namespace tenax::ckpt
