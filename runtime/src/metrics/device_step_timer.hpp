// Internal: timing the phases of a step on the device, with CUDA events recorded on the step's stream at every phase
// change. A phase's device time is the time between the events that open and close it, so work the host enqueued
// asynchronously is charged to the phase that enqueued it, and a phase in which the host only waited (DataWait) costs
// device time only if the device ran dry before the host recorded the closing event: the device's idle time.
//
// Results are read without blocking: pop(false) returns the oldest ended step once its last event has completed.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "metrics/step_times.hpp"

namespace tenax::metrics::detail {

struct DeviceStep {
  StepTimes times;
  std::vector<TraceInterval> intervals;  // device track, on the host's steady clock; only for traced steps
};

class DeviceStepTimer {
 public:
  virtual ~DeviceStepTimer() = default;
  // Starts a step. The device time since the previous step's end (the device idle or busy with work enqueued between
  // steps) is charged to this step's Other, so device steps tile the device timeline.
  virtual void begin_step(std::int64_t step, bool trace) = 0;
  // The interval since the previous change belonged to `closing`.
  virtual void mark(Phase closing) = 0;
  virtual void end_step(Phase closing) = 0;
  // The oldest ended step whose events have completed; with wait, waits for them. False when there is none (or, without
  // wait, it has not completed yet).
  virtual bool pop(bool wait, DeviceStep& out) = 0;
  virtual std::size_t pending() const = 0;
};

// `stream` is a cudaStream_t. Throws UsageError in a build without CUDA, DeviceError when CUDA fails.
std::unique_ptr<DeviceStepTimer> make_device_step_timer(void* stream);

}  // namespace tenax::metrics::detail
