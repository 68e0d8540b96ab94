// The CUDA implementation of DeviceStepTimer (see device_step_timer.hpp), and the error a build without CUDA gives.
#include "metrics/device_step_timer.hpp"

#include <chrono>
#include <deque>

#include "tenax/build_config.hpp"
#include "tenax/error.hpp"

#if TENAX_HAVE_CUDA
#include <cuda_runtime.h>

#include "core/check_cuda.hpp"
#endif

namespace tenax::metrics::detail {

#if TENAX_HAVE_CUDA
namespace {

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class CudaStepTimer final : public DeviceStepTimer {
 public:
  explicit CudaStepTimer(cudaStream_t stream) : stream_(stream) {
    // Fails here, naming the problem, rather than at the first step: no device, no driver, or not a stream.
    if (cudaStreamQuery(stream_) != cudaErrorNotReady) TENAX_CHECK_CUDA(cudaStreamQuery(stream_));
  }
  ~CudaStepTimer() override {
    // Pending events may still be in flight; destroying a recorded event is allowed (CUDA releases it on completion).
    for (cudaEvent_t e : created_)
      cudaEventDestroy(e);
  }

  void begin_step(std::int64_t step, bool trace) override {
    if (trace && anchor_ == nullptr) take_anchor();
    current_ = Pending{step, trace, {}};
    if (previous_end_ != nullptr) current_.marks.push_back({Phase::Other, previous_end_});
    mark(Phase::Other);
  }

  void mark(Phase closing) override {
    cudaEvent_t e = acquire();
    TENAX_CHECK_CUDA(cudaEventRecord(e, stream_));
    current_.marks.push_back({closing, e});
  }

  void end_step(Phase closing) override {
    mark(closing);
    previous_end_ = current_.marks.back().event;
    pending_.push_back(std::move(current_));
  }

  bool pop(bool wait, DeviceStep& out) override {
    if (pending_.empty()) return false;
    Pending& p = pending_.front();
    cudaEvent_t last = p.marks.back().event;
    if (wait) {
      TENAX_CHECK_CUDA(cudaEventSynchronize(last));
    } else {
      const cudaError_t status = cudaEventQuery(last);
      if (status == cudaErrorNotReady) return false;
      TENAX_CHECK_CUDA(status);
    }
    out = DeviceStep{};
    out.times.step = p.step;
    for (std::size_t k = 1; k < p.marks.size(); ++k) {
      float ms = 0;
      TENAX_CHECK_CUDA(cudaEventElapsedTime(&ms, p.marks[k - 1].event, p.marks[k].event));
      const double seconds = static_cast<double>(ms) / 1e3;
      out.times.seconds[static_cast<std::size_t>(index_of(p.marks[k].phase))] += seconds;
      out.times.total += seconds;
      if (p.trace)
        out.intervals.push_back({Track::Device, index_of(p.marks[k].phase), p.step, to_host_ns(p.marks[k - 1].event),
                                 to_host_ns(p.marks[k].event)});
    }
    if (p.trace)
      out.intervals.push_back(
          {Track::Device, kStepKind, p.step, to_host_ns(p.marks.front().event), to_host_ns(p.marks.back().event)});
    // Every event but the last is free again; the last one opens the next step.
    for (std::size_t k = 0; k + 1 < p.marks.size(); ++k)
      free_.push_back(p.marks[k].event);
    pending_.pop_front();
    return true;
  }

  std::size_t pending() const override { return pending_.size(); }

 private:
  struct Mark {
    Phase phase;  // the phase of the interval that ends at `event`
    cudaEvent_t event;
  };
  struct Pending {
    std::int64_t step = 0;
    bool trace = false;
    std::vector<Mark> marks;
  };

  cudaEvent_t acquire() {
    if (!free_.empty()) {
      cudaEvent_t e = free_.back();
      free_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    TENAX_CHECK_CUDA(cudaEventCreate(&e));
    created_.push_back(e);
    return e;
  }

  // Device times become host times through one anchor event whose completion the host observed: taken once, when the
  // first traced step begins (the only place this timer waits for the device outside a gather).
  void take_anchor() {
    TENAX_CHECK_CUDA(cudaStreamSynchronize(stream_));
    anchor_ = acquire();
    TENAX_CHECK_CUDA(cudaEventRecord(anchor_, stream_));
    TENAX_CHECK_CUDA(cudaEventSynchronize(anchor_));
    anchor_host_ns_ = steady_ns();
  }
  std::int64_t to_host_ns(cudaEvent_t e) const {
    float ms = 0;
    TENAX_CHECK_CUDA(cudaEventElapsedTime(&ms, anchor_, e));
    return anchor_host_ns_ + static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
  }

  cudaStream_t stream_;
  Pending current_;
  std::deque<Pending> pending_;
  cudaEvent_t previous_end_ = nullptr;
  std::vector<cudaEvent_t> free_;
  std::vector<cudaEvent_t> created_;
  cudaEvent_t anchor_ = nullptr;
  std::int64_t anchor_host_ns_ = 0;
};

}  // namespace

std::unique_ptr<DeviceStepTimer> make_device_step_timer(void* stream) {
  return std::make_unique<CudaStepTimer>(static_cast<cudaStream_t>(stream));
}

#else

std::unique_ptr<DeviceStepTimer> make_device_step_timer(void*) {
  throw UsageError(
      "metrics: Options::cuda_stream is set but this build of tenax has no CUDA: leave cuda_stream null to time "
      "phases on the host, or rebuild with CUDA (-DTENAX_WITH_CUDA=ON)");
}

#endif

}  // namespace tenax::metrics::detail
