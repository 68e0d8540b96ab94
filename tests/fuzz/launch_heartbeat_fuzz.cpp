// Heartbeat files (heartbeats.hpp) are written by the ranks' program: any bytes must end in a heartbeat or an IoError
// naming the problem, never a crash, a sanitizer report or another exception. An accepted heartbeat then goes where
// the launcher takes it: the hang detector and the classification of an attempt's end.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "classify.hpp"
#include "hang_detector.hpp"
#include "heartbeats.hpp"
#include "tenax/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The launcher reads at most kMaxHeartbeatBytes of a file and refuses a larger one before parsing it.
  if (size > tenax::launch::kMaxHeartbeatBytes) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  tenax::launch::Heartbeat beat;
  try {
    beat = tenax::launch::parse_heartbeat(text, "fuzz");
  } catch (const tenax::IoError&) {
    return 0;  // refused, with a message
  }
  if (beat.rank < 0) std::abort();

  using namespace tenax::launch;
  HangSettings settings;
  settings.fixed_timeout_s = 1;
  HangDetector detector(settings, 4, 0.0);
  Heartbeat later = beat;
  later.beat += 1;
  detector.observe({beat}, 0.5);
  detector.observe({later}, 1.0);
  (void)detector.check(5.0);
  (void)detector.check(1e9);

  AttemptEvidence evidence;
  evidence.beats = {beat, later};
  evidence.manager_exit_code = 1;
  (void)classify(evidence);
  evidence.preemption_forwarded = true;
  evidence.forwarded_signal = 10;
  (void)classify(evidence);
  return 0;
}
