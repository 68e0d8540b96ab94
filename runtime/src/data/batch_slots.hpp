// Internal: the memory behind the DataLoader's ring of batch slots.
//
// Host-only builds keep plain host buffers. CUDA builds can make them page-locked and add a device buffer per slot with
// the events that order a slot's reuse: a worker writes slot s only after the consumer's stream has passed the point
// where it released s, and the consumer's stream uses s only after the worker's copy into it has finished.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "tenax/data_loader.hpp"

namespace tenax::detail {

class BatchSlots {
 public:
  virtual ~BatchSlots() = default;
  virtual std::span<std::byte> host(int slot) = 0;
  virtual void* device(int slot) = 0;

  // Worker side, before the producer writes the slot: waits until the consumer no longer uses it on the device.
  virtual void wait_until_released(int slot) = 0;
  // Worker side, after the producer wrote the slot: starts the slot's host-to-device copy (CUDA with a device).
  virtual void start_copy(int slot, int worker) = 0;
  // Consumer side, when next() hands the slot out: orders the consumer's stream after the slot's copy.
  virtual void hand_out(int slot) = 0;
  // Consumer side, when the consumer moves past the slot: marks the point of its stream after which it may be reused.
  virtual void release(int slot) = 0;
  // Called once in each worker thread before it produces anything (selects the CUDA device).
  virtual void bind_worker_thread() = 0;
};

// Throws UsageError when options ask for CUDA features in a build without CUDA, DeviceError when CUDA fails.
std::unique_ptr<BatchSlots> make_batch_slots(const DataLoaderOptions& options, int slots, int workers);

}  // namespace tenax::detail
