#include "tensor/op_profiler.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "tenax/build_config.hpp"
#include "tenax/error.hpp"
#include "tensor/device_wait.hpp"

#if TENAX_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tenax::detail {
namespace {

// Boundaries between two read-backs of the device's events: a GPT step makes a few thousand.
constexpr std::size_t kEventBatch = 16384;

std::string shape_text(const OpKey& k) {
  std::string s;
  if (k.ta != 0) {
    s += k.ta;
    s += k.tb;
    s += ' ';
  }
  for (std::uint8_t i = 0; i < k.ndims; ++i) {
    if (i > 0) s += 'x';
    s += std::to_string(k.dims[i]);
  }
  return s;
}

}  // namespace

std::size_t OpProfiler::KeyHash::operator()(const OpKey& k) const noexcept {
  std::size_t h = std::hash<const void*>()(k.op);
  auto mix = [&h](std::uint64_t v) {
    h ^= std::hash<std::uint64_t>()(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  for (std::uint8_t i = 0; i < k.ndims; ++i)
    mix(k.dims[i]);
  mix((static_cast<std::uint64_t>(k.ta) << 16) | (static_cast<std::uint64_t>(k.tb) << 8) |
      (k.has_dtype ? static_cast<std::uint64_t>(k.dtype) + 1 : 0));
  return h;
}

OpProfiler::OpProfiler(void* stream, Clock clock) : stream_(stream), clock_(std::move(clock)) {
  if (!clock_)
    clock_ = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  rows_.push_back(Row{op_key("(between ops)", {}), 0, 0, 0, 0});
#if TENAX_HAVE_CUDA
  if (stream_ != nullptr) {
    // All created now, on the context's device (current here): an event must be recorded on its own device's stream.
    events_.resize(kEventBatch, nullptr);
    closing_.resize(kEventBatch, 0);
    for (void*& e : events_) {
      const cudaError_t made = cudaEventCreate(reinterpret_cast<cudaEvent_t*>(&e));
      if (made != cudaSuccess) {
        for (void* created : events_)
          if (created != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(created));
        throw DeviceError(std::string("op profile: cudaEventCreate: ") + cudaGetErrorString(made));
      }
    }
  }
#endif
  if (stream_ == nullptr)
    last_ = clock_();  // the window starts now
  else
    boundary(0);  // the chain's first event
}

OpProfiler::~OpProfiler() {
#if TENAX_HAVE_CUDA
  // Destroying a recorded event is allowed: CUDA releases it once it completes.
  for (void* e : events_)
    if (e != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(e));
#endif
}

int OpProfiler::row_of(const OpKey& key) {
  const auto [it, added] = index_.try_emplace(key, static_cast<int>(rows_.size()));
  if (added) rows_.push_back(Row{key, 0, 0, 0, 0});
  return it->second;
}

void OpProfiler::enter(const OpKey& key, double flops, double bytes) noexcept {
  try {
    const int row = row_of(key);
    boundary(open_row());
    Row& r = rows_[static_cast<std::size_t>(row)];
    ++r.calls;
    r.flops += flops;
    r.bytes += bytes;
    open_.push_back(row);
  } catch (...) {  // out of memory for a new row: the profile stops, finish() says so
    if (failure_.empty()) failure_ = "out of memory for the op profile's rows";
  }
}

void OpProfiler::leave() noexcept {
  if (open_.empty()) return;  // enter() failed
  boundary(open_row());
  open_.pop_back();
}

void OpProfiler::boundary(int closing) noexcept {
  if (!failure_.empty()) return;
  if (stream_ == nullptr) {
    const double now = clock_();
    rows_[static_cast<std::size_t>(closing)].seconds += now - last_;
    last_ = now;
    return;
  }
#if TENAX_HAVE_CUDA
  try {
    record(closing);
    if (used_ == events_.size()) {
      // More boundaries than the pool holds since the last collect(): read them back now (the host waits for the
      // device once), then start a new chain. The interval up to its first event is the profiler's own wait and is
      // charged to no row.
      drain(true);
      used_ = 0;
      record(0);
    }
  } catch (const std::exception& e) {
    fail(e);
  }
#else
  (void)closing;
#endif
}

void OpProfiler::record(int closing) {
#if TENAX_HAVE_CUDA
  const cudaError_t recorded =
      cudaEventRecord(static_cast<cudaEvent_t>(events_[used_]), static_cast<cudaStream_t>(stream_));
  if (recorded != cudaSuccess) throw DeviceError(std::string("cudaEventRecord: ") + cudaGetErrorString(recorded));
  closing_[used_] = closing;
  ++used_;
#else
  (void)closing;
#endif
}

void OpProfiler::drain(bool wait) {
#if TENAX_HAVE_CUDA
  if (used_ < 2) return;
  auto event = [this](std::size_t i) { return static_cast<cudaEvent_t>(events_[i]); };
  auto done = [&](std::size_t i) {
    const cudaError_t q = cudaEventQuery(event(i));
    if (q == cudaErrorNotReady) return false;  // not an error, and not kept as the last one (bounded_wait relies on it)
    if (q != cudaSuccess) throw DeviceError(std::string("cudaEventQuery: ") + cudaGetErrorString(q));
    return true;
  };
  // The events of one stream complete in order: [0, complete) have, and a binary search finds where that ends.
  std::size_t complete = used_;
  if (wait) {
    detail::wait_for_event(events_[used_ - 1], "the op profile's read-back of its events");
  } else if (!done(used_ - 1)) {
    std::size_t lo = 0, hi = used_ - 1;  // done(lo) (event 0 precedes every other) or lo == 0; !done(hi)
    if (!done(0)) return;
    while (hi - lo > 1) {
      const std::size_t mid = lo + (hi - lo) / 2;
      (done(mid) ? lo : hi) = mid;
    }
    complete = hi;
  }
  if (complete < 2) return;
  for (std::size_t i = 1; i < complete; ++i) {
    float ms = 0;
    const cudaError_t read = cudaEventElapsedTime(&ms, event(i - 1), event(i));
    if (read != cudaSuccess) throw DeviceError(std::string("cudaEventElapsedTime: ") + cudaGetErrorString(read));
    rows_[static_cast<std::size_t>(closing_[i])].seconds += 1e-3 * ms;
  }
  // The last event read stays as the start of the chain; the events before it are free again.
  std::rotate(events_.begin(), events_.begin() + static_cast<std::ptrdiff_t>(complete - 1),
              events_.begin() + static_cast<std::ptrdiff_t>(used_));
  std::rotate(closing_.begin(), closing_.begin() + static_cast<std::ptrdiff_t>(complete - 1),
              closing_.begin() + static_cast<std::ptrdiff_t>(used_));
  used_ -= complete - 1;
#else
  (void)wait;
#endif
}

void OpProfiler::collect() noexcept {
  if (stream_ == nullptr || !failure_.empty()) return;
  try {
    drain(false);
  } catch (const std::exception& e) {
    fail(e);
  }
}

void OpProfiler::fail(const std::exception& e) noexcept {
  if (!failure_.empty()) return;
  failure_ = e.what();
  if (dynamic_cast<const CommError*>(&e) != nullptr) comm_failure_ = std::current_exception();
}

OpProfile OpProfiler::finish() {
  boundary(open_row());
  if (stream_ != nullptr && failure_.empty()) {
    try {
      drain(true);
    } catch (const std::exception& e) {
      fail(e);
    }
  }
  // A peer's failure (the bounded wait gave up, every communicator aborted) is the run's problem, not the profile's.
  if (comm_failure_) std::rethrow_exception(comm_failure_);
  if (!failure_.empty()) throw DeviceError("op profile: " + failure_ + "; the profile is incomplete and was dropped");
  OpProfile out;
  out.clock = stream_ == nullptr ? "host clock" : "cuda events";
  for (const Row& r : rows_) {
    if (r.calls == 0 && r.seconds == 0) continue;
    OpProfileRow row;
    row.op = r.key.op;
    row.shape = shape_text(r.key);
    if (r.key.has_dtype) row.dtype = std::string(dtype_name(r.key.dtype));
    row.calls = r.calls;
    row.seconds = r.seconds;
    row.flops = r.flops;
    row.bytes = r.bytes;
    out.seconds += r.seconds;
    out.rows.push_back(std::move(row));
  }
  std::stable_sort(out.rows.begin(), out.rows.end(),
                   [](const OpProfileRow& a, const OpProfileRow& b) { return a.seconds > b.seconds; });
  return out;
}

}  // namespace tenax::detail
