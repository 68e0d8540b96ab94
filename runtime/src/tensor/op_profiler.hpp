// Internal: the op profile of one ExecutionContext (tenax/op_profile.hpp says what it measures).
//
// The window is cut into intervals at every op's start and end; each interval is charged to the innermost op open
// during it, or to "(between ops)". Host clock: each interval is measured when it closes. CUDA events: one event per
// boundary on the compute stream, read back in batches.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tenax/dtype.hpp"
#include "tenax/execution.hpp"
#include "tenax/op_profile.hpp"

namespace tenax::detail {

// What makes two calls the same row: the op, its sizes, and for products the transposes and the 16-bit format.
struct OpKey {
  const char* op = "";  // a string literal
  std::array<std::uint64_t, 4> dims{};
  std::uint8_t ndims = 0;
  char ta = 0, tb = 0;     // 'N'/'T' for matrix products, 0 otherwise
  bool has_dtype = false;  // a 16-bit input format
  DType dtype = DType::F32;
  bool operator==(const OpKey&) const = default;
};

class OpProfiler {
 public:
  using Clock = std::function<double()>;  // seconds on a monotonic clock
  // stream: a cudaStream_t to time with CUDA events, or null for the host clock (`clock`, default the steady clock).
  explicit OpProfiler(void* stream, Clock clock = {});
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  // An op starts / returns. Never throw: a failed event record stops the profile, and finish() reports it.
  void enter(const OpKey& key, double flops, double bytes) noexcept;
  void leave() noexcept;
  // Reads back the events the device has completed, without waiting (the engine calls it at every step's end, when the
  // step's work is done): the pool then never fills inside a step unless one step makes more boundaries than it holds.
  void collect() noexcept;
  // Closes the window (waiting for the device, bounded as every host wait is) and returns the rows. Throws
  // DeviceError if an event failed, and rethrows the CommError/TimeoutError of a wait that gave up on a failed peer.
  OpProfile finish();

 private:
  struct KeyHash {
    std::size_t operator()(const OpKey& k) const noexcept;
  };
  struct Row {
    OpKey key;
    std::uint64_t calls = 0;
    double seconds = 0, flops = 0, bytes = 0;
  };
  int row_of(const OpKey& key);
  int open_row() const { return open_.empty() ? 0 : open_.back(); }
  void boundary(int closing) noexcept;  // the interval since the previous boundary belonged to row `closing`
  void record(int closing);             // device: the next event of the chain
  // Device: charges the intervals between the completed events (all of them, waiting, with `wait`) and keeps the last
  // one read as the start of the chain.
  void drain(bool wait);

  void* stream_;
  Clock clock_;
  std::vector<Row> rows_;  // rows_[0]: between ops
  std::unordered_map<OpKey, int, KeyHash> index_;
  std::vector<int> open_;  // the ops entered and not yet left, innermost last
  double last_ = 0;        // host clock: the previous boundary
  // Device: a pool of timing events; events_[0..used_) are recorded and not yet read back, closing_[i] is the row of
  // the interval that event i closes (i >= 1).
  std::vector<void*> events_;
  std::vector<int> closing_;
  std::size_t used_ = 0;
  void fail(const std::exception& e) noexcept;  // inside a catch: the first failure stops the profile
  std::string failure_;                         // the first failure, which stopped the profile
  std::exception_ptr comm_failure_;             // ... when it was a CommError (a peer failed): finish() rethrows it
};

// Opens an op's interval for the scope's lifetime when `ctx` is being profiled; nothing otherwise.
class OpScope {
 public:
  OpScope(const ExecutionContext& ctx, const OpKey& key, double flops = 0, double bytes = 0)
      : profiler_(ctx.op_profiler()) {
    if (profiler_ != nullptr) profiler_->enter(key, flops, bytes);
  }
  ~OpScope() {
    if (profiler_ != nullptr) profiler_->leave();
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpProfiler* profiler_;
};

// Keys for the common shapes.
inline OpKey op_key(const char* op, std::initializer_list<std::size_t> dims) {
  OpKey k;
  k.op = op;
  for (std::size_t d : dims)
    if (k.ndims < k.dims.size()) k.dims[k.ndims++] = d;
  return k;
}

// The key of a call computing in (or casting to/from) a 16-bit format; F32 adds nothing, so rows that print alike are
// one row.
inline OpKey with_dtype(OpKey k, DType dtype) {
  if (dtype != DType::F32) {
    k.has_dtype = true;
    k.dtype = dtype;
  }
  return k;
}

// The attention core's counted work: q k^T and P v over the unmasked (causal) half, for every core (the batched one
// computes the masked half too; only the useful products count). The backward's four products are twice this.
inline double causal_attention_flops(std::size_t B, std::size_t H, std::size_t T, std::size_t D) {
  return 2.0 * static_cast<double>(B) * static_cast<double>(H) * static_cast<double>(T) * static_cast<double>(T) *
         static_cast<double>(D);
}

}  // namespace tenax::detail
