// Pipeline schedules as data: for one stage, the ordered list of compute and communication actions that run a step's
// micro-batches through the pipeline. Pure functions, no communication, so they are tested on their own (including a
// simulation of all stages under blocking point-to-point semantics, which shows they cannot deadlock).
//
//   GPipe: every forward, then every backward (simple; holds all micro-batches' activations).
//   1F1B:  (PipeDream-Flush / Megatron) a warm-up of pp-1-stage forwards, then alternating one forward and one
//          backward, then the remaining backwards; at most pp-stage micro-batches' activations alive at once.
//
// Communication actions name the micro-batch whose tensor they carry. Paired actions (SendForwardRecvBackward,
// SendBackwardRecvForward) exchange with the SAME neighbour in both directions and are executed as one send_recv, which
// is what keeps 1F1B deadlock-free when sends block until received. The first stage has no Recv/SendForward from/to a
// previous stage and the last stage none to a next stage: those halves are dropped, so a paired action appears only
// where both halves exist. Backward of the last micro-batch (is_last_backward) is when a stage's gradients are final.
#pragma once

#include <string>
#include <vector>

namespace tenax {

enum class PipelineOp {
  RecvForward,              // activation of `micro_batch` from the previous stage
  Forward,                  // forward of `micro_batch`
  SendForward,              // activation of `micro_batch` to the next stage
  RecvBackward,             // gradient of `micro_batch` from the next stage
  Backward,                 // backward of `micro_batch`
  SendBackward,             // gradient of `micro_batch` to the previous stage
  SendForwardRecvBackward,  // activation of `micro_batch` to next, gradient of `peer_micro_batch` from next
  SendBackwardRecvForward,  // gradient of `micro_batch` to previous, activation of `peer_micro_batch` from previous
};

enum class PipelineScheduleKind { OneFOneB, GPipe };

struct PipelineAction {
  PipelineOp op;
  int micro_batch = 0;
  int peer_micro_batch = -1;  // paired actions only
  friend bool operator==(const PipelineAction&, const PipelineAction&) = default;
};

// Throws UsageError for stages < 1, stage outside [0, stages), or micro_batches < 1.
std::vector<PipelineAction> pipeline_schedule(PipelineScheduleKind kind, int stages, int stage, int micro_batches);

// "1f1b" or "gpipe"; throws UsageError naming the choices.
PipelineScheduleKind parse_pipeline_schedule(const std::string& text);
std::string to_string(const PipelineAction& action);  // "F3", "SendFwd3+RecvBwd1", ...

}  // namespace tenax
