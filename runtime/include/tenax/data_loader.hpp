// DataLoader: producer threads fill a bounded ring of batches ahead of the training step.
//
//   tenax::DataLoader loader({.batch_bytes = bytes, .first_index = start_step},
//                            [&](std::int64_t index, std::span<std::byte> out) { make_batch(index, out); });
//   tenax::Batch batch = loader.next();   // batch `start_step`, then start_step + 1, ...
//
// Determinism: batch i is whatever the producer writes for index i, and next() returns batches in index order, so the
// sequence a training run sees does not depend on the number of workers or on thread timing. The producer must
// therefore be a pure function of the index (seed any randomness with it) and safe to call from several threads.
//
// Bounding: at most `prefetch` batches are produced ahead of the one the consumer holds; a batch returned by next()
// stays valid until the following call to next() (its slot is then refilled). Workers block while the ring is full.
//
// Starvation: the time next() blocks because the batch is not ready yet is the consumer's data wait; stats() sums it
// (wrap next() in StepMetrics::measure(Phase::DataWait) to put it in the step metrics).
//
// GPU (CUDA builds): `pinned` allocates the host slots page-locked. `device >= 0` also keeps a device copy per slot:
// the worker that produced a batch copies it to the device on its own stream, and next() makes `stream` (the consumer's
// stream) wait for that copy without blocking the host; the slot is reused only after `stream` has passed the next
// call to next(). Batch::device is then valid in `stream` order.
//
// Errors: an exception thrown by the producer for index i is rethrown by the next() that would have returned batch i.
// Threads: next() and stats() are for the one consumer thread; the destructor stops and joins the workers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

namespace tenax {

struct Batch {
  std::int64_t index = -1;
  std::span<const std::byte> host;  // batch_bytes bytes written by the producer
  void* device = nullptr;           // device copy (DataLoaderOptions::device >= 0), valid in the consumer's stream
};

struct DataLoaderOptions {
  std::size_t batch_bytes = 0;   // size of every batch (> 0)
  int workers = 0;               // producer threads; 0: TENAX_LOADER_WORKERS
  int prefetch = 0;              // batches produced ahead of the consumer; 0: TENAX_LOADER_PREFETCH
  std::int64_t first_index = 0;  // index of the first batch (the resume step, for a restarted run)
  std::int64_t end_index = -1;   // one past the last batch; -1: endless
  bool pinned = false;           // page-locked host slots (CUDA builds; UsageError otherwise)
  int device = -1;               // >= 0: copy each batch to this CUDA device ahead of the step
  void* stream = nullptr;        // cudaStream_t of the consumer (with device >= 0; null: the default stream)
};

struct DataLoaderStats {
  std::int64_t batches = 0;      // batches returned by next()
  double wait_seconds = 0;       // total time next() blocked
  double max_wait_seconds = 0;   // longest single wait
  double last_wait_seconds = 0;  // wait of the most recent next()
};

class DataLoader {
 public:
  // Fills `out` (batch_bytes bytes) with batch `index`. Called concurrently from the worker threads.
  using Producer = std::function<void(std::int64_t index, std::span<std::byte> out)>;

  // Starts the workers. Throws UsageError for bad options (naming the option and the fix).
  DataLoader(DataLoaderOptions options, Producer producer);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The next batch in index order; blocks until it is ready. Throws UsageError past end_index, or the producer's
  // exception for this index.
  Batch next();
  DataLoaderStats stats() const;
  const DataLoaderOptions& options() const;  // with workers and prefetch resolved

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tenax
