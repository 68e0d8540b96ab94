// DataLoader: a ring of prefetch + 1 slots; batch i lives in slot i % slots. Workers claim indices in order from a
// shared counter (so the ring fills front first), but may finish them in any order; the consumer takes index after
// index, which is what keeps the sequence independent of the number of workers.
#include "tenax/data_loader.hpp"

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/batch_slots.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"

namespace tenax {

struct DataLoader::State {
  DataLoaderOptions options;
  Producer producer;
  int slot_count = 0;
  std::unique_ptr<detail::BatchSlots> slots;

  std::mutex mutex;
  std::condition_variable slot_ready;      // workers -> consumer
  std::condition_variable slot_freed;      // consumer (or shutdown) -> workers
  std::int64_t next_claim = 0;             // next index a worker will produce
  std::int64_t next_out = 0;               // index the next call to next() returns
  std::vector<std::int64_t> ready_index;   // per slot: index whose batch is complete there, -1 if none
  std::vector<std::exception_ptr> errors;  // per slot: the producer's exception for ready_index
  bool stopping = false;
  DataLoaderStats stats;

  std::vector<std::thread> threads;

  int slot_of(std::int64_t index) const { return static_cast<int>(index % slot_count); }
  bool endless() const { return options.end_index < 0; }

  // A worker may produce index i once the consumer has moved past i - slots, i.e. i < next_out + prefetch
  // (next_out - 1 is the batch the consumer may still hold).
  bool may_claim() const {
    return next_claim < next_out + options.prefetch && (endless() || next_claim < options.end_index);
  }

  void work(int worker) {
    try {
      slots->bind_worker_thread();
    } catch (...) {
      fail_all(std::current_exception());
      return;
    }
    for (;;) {
      std::int64_t index;
      {
        std::unique_lock lock(mutex);
        slot_freed.wait(lock, [&] { return stopping || may_claim(); });
        if (stopping) return;
        index = next_claim++;
      }
      const int slot = slot_of(index);
      std::exception_ptr error;
      try {
        slots->wait_until_released(slot);
        producer(index, slots->host(slot));
        slots->start_copy(slot, worker);
      } catch (...) {
        error = std::current_exception();
      }
      {
        std::lock_guard lock(mutex);
        ready_index[static_cast<std::size_t>(slot)] = index;
        errors[static_cast<std::size_t>(slot)] = error;
      }
      slot_ready.notify_all();
    }
  }

  // A worker that cannot run at all (no CUDA device) fails every batch it would have produced, so the consumer sees
  // the error instead of waiting forever.
  void fail_all(std::exception_ptr error) {
    {
      std::lock_guard lock(mutex);
      for (std::size_t s = 0; s < errors.size(); ++s)
        errors[s] = error;
      stopping = true;
    }
    slot_ready.notify_all();
    slot_freed.notify_all();
  }
};

namespace {

void validate(DataLoaderOptions& o) {
  if (o.batch_bytes == 0) throw UsageError("DataLoader: batch_bytes is 0: set it to the size in bytes of one batch");
  if (o.workers == 0) o.workers = static_cast<int>(env::get_int("TENAX_LOADER_WORKERS"));
  if (o.prefetch == 0) o.prefetch = static_cast<int>(env::get_int("TENAX_LOADER_PREFETCH"));
  if (o.workers < 1 || o.workers > 256)
    throw UsageError("DataLoader: workers = " + std::to_string(o.workers) + " is out of range: use 1 to 256");
  if (o.prefetch < 1 || o.prefetch > 4096)
    throw UsageError("DataLoader: prefetch = " + std::to_string(o.prefetch) + " is out of range: use 1 to 4096");
  if (o.first_index < 0)
    throw UsageError("DataLoader: first_index = " + std::to_string(o.first_index) +
                     " is negative: batches count from 0");
  if (o.end_index >= 0 && o.end_index < o.first_index)
    throw UsageError("DataLoader: end_index = " + std::to_string(o.end_index) + " is before first_index = " +
                     std::to_string(o.first_index) + ": use end_index >= first_index, or -1 for an endless loader");
  if (o.stream != nullptr && o.device < 0)
    throw UsageError("DataLoader: a stream was given without a device: set device to the CUDA device of the stream");
}

}  // namespace

DataLoader::DataLoader(DataLoaderOptions options, Producer producer) : state_(std::make_unique<State>()) {
  if (!producer) throw UsageError("DataLoader: the producer function is empty: pass a function that fills a batch");
  validate(options);
  State& s = *state_;
  s.options = options;
  s.producer = std::move(producer);
  s.slot_count = options.prefetch + 1;
  s.slots = detail::make_batch_slots(options, s.slot_count, options.workers);
  s.ready_index.assign(static_cast<std::size_t>(s.slot_count), -1);
  s.errors.assign(static_cast<std::size_t>(s.slot_count), nullptr);
  s.next_claim = s.next_out = options.first_index;
  s.threads.reserve(static_cast<std::size_t>(options.workers));
  try {
    for (int w = 0; w < options.workers; ++w)
      s.threads.emplace_back([&s, w] { s.work(w); });
  } catch (...) {
    s.fail_all(nullptr);
    for (auto& t : s.threads)
      t.join();
    throw;
  }
}

DataLoader::~DataLoader() {
  State& s = *state_;
  {
    std::lock_guard lock(s.mutex);
    s.stopping = true;
  }
  s.slot_freed.notify_all();
  for (auto& t : s.threads)
    t.join();
}

Batch DataLoader::next() {
  State& s = *state_;
  std::unique_lock lock(s.mutex);
  const std::int64_t index = s.next_out;
  if (!s.endless() && index >= s.options.end_index)
    throw UsageError("DataLoader: next() called after the last batch (end_index = " +
                     std::to_string(s.options.end_index) + "): stop at end_index or construct the loader endless");
  const int slot = s.slot_of(index);
  const auto start = std::chrono::steady_clock::now();
  s.slot_ready.wait(lock, [&] {
    return s.ready_index[static_cast<std::size_t>(slot)] == index || s.errors[static_cast<std::size_t>(slot)];
  });
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  s.stats.batches += 1;
  s.stats.wait_seconds += waited;
  s.stats.last_wait_seconds = waited;
  if (waited > s.stats.max_wait_seconds) s.stats.max_wait_seconds = waited;
  // The previous batch's slot becomes free once the consumer's stream has passed this point.
  if (index > s.options.first_index) s.slots->release(s.slot_of(index - 1));
  s.next_out = index + 1;  // also after an error: a later call moves on instead of rethrowing the same batch
  if (std::exception_ptr error = s.errors[static_cast<std::size_t>(slot)]) {
    s.errors[static_cast<std::size_t>(slot)] = nullptr;
    lock.unlock();
    s.slot_freed.notify_all();
    std::rethrow_exception(error);
  }
  s.slots->hand_out(slot);
  lock.unlock();
  s.slot_freed.notify_all();
  return Batch{index, s.slots->host(slot), s.slots->device(slot)};
}

DataLoaderStats DataLoader::stats() const {
  std::lock_guard lock(state_->mutex);
  return state_->stats;
}

const DataLoaderOptions& DataLoader::options() const {
  return state_->options;
}

}  // namespace tenax
