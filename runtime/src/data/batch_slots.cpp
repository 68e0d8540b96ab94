// Host memory for the DataLoader's slots, and the choice between it and the CUDA flavour.
#include "data/batch_slots.hpp"

#include <vector>

#include "tenax/build_config.hpp"
#include "tenax/error.hpp"

namespace tenax::detail {

#if TENAX_HAVE_CUDA
std::unique_ptr<BatchSlots> make_cuda_batch_slots(const DataLoaderOptions& options, int slots, int workers);
#endif

namespace {

class HostBatchSlots final : public BatchSlots {
 public:
  HostBatchSlots(std::size_t bytes, int slots) : bytes_(bytes), buffers_(static_cast<std::size_t>(slots)) {
    // Value-initialised, hence touched now: a fresh page costs ~10 us on first write, which would otherwise land in
    // the producers' first batches and look like starvation.
    for (auto& buffer : buffers_)
      buffer = std::make_unique<std::byte[]>(bytes);
  }
  std::span<std::byte> host(int slot) override { return {buffers_[static_cast<std::size_t>(slot)].get(), bytes_}; }
  void* device(int) override { return nullptr; }
  void wait_until_released(int) override {}
  void start_copy(int, int) override {}
  void hand_out(int) override {}
  void release(int) override {}
  void bind_worker_thread() override {}

 private:
  std::size_t bytes_;
  std::vector<std::unique_ptr<std::byte[]>> buffers_;
};

}  // namespace

std::unique_ptr<BatchSlots> make_batch_slots(const DataLoaderOptions& options, int slots, int workers) {
  if (!options.pinned && options.device < 0) return std::make_unique<HostBatchSlots>(options.batch_bytes, slots);
#if TENAX_HAVE_CUDA
  return make_cuda_batch_slots(options, slots, workers);
#else
  throw UsageError(
      "DataLoader: pinned host memory or a device copy was requested, but this build of tenax has no CUDA: set "
      "pinned = false and device = -1, or rebuild with CUDA (-DTENAX_WITH_CUDA=ON)");
#endif
}

}  // namespace tenax::detail
