// CUDA flavour of the DataLoader's slots: page-locked host buffers, optional device buffers, one copy stream per worker
// (so copies of different batches overlap each other and the consumer's compute), and two events per slot.
#include <cuda_runtime.h>

#include <vector>

#include "core/check_cuda.hpp"
#include "data/batch_slots.hpp"

namespace tenax::detail {
namespace {

struct Slot {
  void* host = nullptr;
  void* device = nullptr;
  cudaEvent_t copied = nullptr;    // recorded on the worker's stream after the copy into `device`
  cudaEvent_t released = nullptr;  // recorded on the consumer's stream when the consumer moves past the slot
  bool released_recorded = false;  // written by the consumer before it wakes the workers (under the loader's mutex)
};

class CudaBatchSlots final : public BatchSlots {
 public:
  CudaBatchSlots(const DataLoaderOptions& options, int slots, int workers)
      : bytes_(options.batch_bytes),
        device_index_(options.device),
        consumer_stream_(static_cast<cudaStream_t>(options.stream)),
        slots_(static_cast<std::size_t>(slots)) {
    try {
      if (device_index_ >= 0) TENAX_CHECK_CUDA(cudaSetDevice(device_index_));
      for (Slot& slot : slots_) {
        TENAX_CHECK_CUDA(cudaHostAlloc(&slot.host, bytes_, cudaHostAllocPortable));
        if (device_index_ < 0) continue;
        TENAX_CHECK_CUDA(cudaMalloc(&slot.device, bytes_));
        TENAX_CHECK_CUDA(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming));
        TENAX_CHECK_CUDA(cudaEventCreateWithFlags(&slot.released, cudaEventDisableTiming));
      }
      if (device_index_ >= 0) {
        copy_streams_.resize(static_cast<std::size_t>(workers));
        for (cudaStream_t& stream : copy_streams_)
          TENAX_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      }
    } catch (...) {
      free_all();
      throw;
    }
  }
  ~CudaBatchSlots() override { free_all(); }

  std::span<std::byte> host(int slot) override { return {static_cast<std::byte*>(at(slot).host), bytes_}; }
  void* device(int slot) override { return at(slot).device; }

  void wait_until_released(int slot) override {
    Slot& s = at(slot);
    if (s.released_recorded) TENAX_CHECK_CUDA(cudaEventSynchronize(s.released));
  }
  void start_copy(int slot, int worker) override {
    if (device_index_ < 0) return;
    Slot& s = at(slot);
    cudaStream_t stream = copy_streams_[static_cast<std::size_t>(worker)];
    TENAX_CHECK_CUDA(cudaMemcpyAsync(s.device, s.host, bytes_, cudaMemcpyHostToDevice, stream));
    TENAX_CHECK_CUDA(cudaEventRecord(s.copied, stream));
  }
  void hand_out(int slot) override {
    if (device_index_ >= 0) TENAX_CHECK_CUDA(cudaStreamWaitEvent(consumer_stream_, at(slot).copied, 0));
  }
  void release(int slot) override {
    if (device_index_ < 0) return;
    Slot& s = at(slot);
    TENAX_CHECK_CUDA(cudaEventRecord(s.released, consumer_stream_));
    s.released_recorded = true;
  }
  void bind_worker_thread() override {
    if (device_index_ >= 0) TENAX_CHECK_CUDA(cudaSetDevice(device_index_));
  }

 private:
  Slot& at(int slot) { return slots_[static_cast<std::size_t>(slot)]; }

  // Errors are ignored here: this runs in destructors and unwinding, and a failed free cannot be acted upon.
  void free_all() noexcept {
    for (cudaStream_t stream : copy_streams_) {
      if (stream == nullptr) continue;
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
    copy_streams_.clear();
    if (device_index_ >= 0) cudaStreamSynchronize(consumer_stream_);
    for (Slot& slot : slots_) {
      if (slot.copied != nullptr) cudaEventDestroy(slot.copied);
      if (slot.released != nullptr) cudaEventDestroy(slot.released);
      if (slot.device != nullptr) cudaFree(slot.device);
      if (slot.host != nullptr) cudaFreeHost(slot.host);
      slot = Slot{};
    }
  }

  std::size_t bytes_;
  int device_index_;
  cudaStream_t consumer_stream_;
  std::vector<Slot> slots_;
  std::vector<cudaStream_t> copy_streams_;
};

}  // namespace

std::unique_ptr<BatchSlots> make_cuda_batch_slots(const DataLoaderOptions& options, int slots, int workers) {
  return std::make_unique<CudaBatchSlots>(options, slots, workers);
}

}  // namespace tenax::detail
