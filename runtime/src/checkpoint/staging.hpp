// Staging memory: one buffer per Checkpointer, sized to what the rank writes, allocated and pre-touched once and reused
// by every save. Pre-touching matters: a fresh 4 KiB page costs ~10 µs to fault in on the VMs tenax targets, which
// would make the first save of 1 GiB take seconds instead of a memcpy's ~0.1 s.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tenax::ckpt {

class StagingArena {
 public:
  StagingArena() = default;
  ~StagingArena();
  StagingArena(const StagingArena&) = delete;
  StagingArena& operator=(const StagingArena&) = delete;

  // Maps and touches `bytes` of memory; with `pin`, also page-locks it for CUDA so device copies are true DMA. Once
  // only, on an empty arena. On failure (IoError, or DeviceError from pinning) the arena stays empty.
  void allocate(std::size_t bytes, bool pin);
  std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t mapped_ = 0;
  bool pinned_ = false;
};

// Copies for Device shards. In builds without CUDA every function throws UsageError (normalize_shards refuses Device
// shards there first).
void pin_host_memory(void* p, std::size_t bytes);
void unpin_host_memory(void* p);
// Enqueues a device-to-host copy on `stream` (a cudaStream_t; null = the legacy default stream).
void copy_device_to_host_async(void* dst, const void* src, std::size_t bytes, void* stream);
// Copies on `stream` (the producer's stream, so that the copy is ordered with the kernels that use the shard) and
// waits for it.
void copy_host_to_device(void* dst, const void* src, std::size_t bytes, void* stream);
// The calling thread's CUDA device, and making `device` the calling thread's: the I/O thread must use the device the
// training thread's shards live on (a thread starts on device 0, and touching it would create a context there).
int current_device();
void use_device(int device);

// A CUDA event marking the end of one save's device copies: recorded by the training thread, waited for by the I/O
// thread before it checksums and writes the staged bytes.
class DeviceCopyFence {
 public:
  DeviceCopyFence();
  ~DeviceCopyFence();
  DeviceCopyFence(const DeviceCopyFence&) = delete;
  DeviceCopyFence& operator=(const DeviceCopyFence&) = delete;
  void record(void* stream);
  void wait();

 private:
  void* event_ = nullptr;
};

}  // namespace tenax::ckpt
