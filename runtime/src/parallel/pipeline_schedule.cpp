#include "tenax/pipeline_schedule.hpp"

#include <algorithm>

#include "tenax/error.hpp"

namespace tenax {

namespace {

// Builds a stage's actions from the logical (Megatron) sequence, dropping the halves that have no neighbour.
class Builder {
 public:
  Builder(int stages, int stage) : first_(stage == 0), last_(stage == stages - 1) {}

  void recv_forward(int mb) {
    if (!first_) add({PipelineOp::RecvForward, mb});
  }
  void forward(int mb) { add({PipelineOp::Forward, mb}); }
  void send_forward(int mb) {
    if (!last_) add({PipelineOp::SendForward, mb});
  }
  void recv_backward(int mb) {
    if (!last_) add({PipelineOp::RecvBackward, mb});
  }
  void backward(int mb) { add({PipelineOp::Backward, mb}); }
  void send_backward(int mb) {
    if (!first_) add({PipelineOp::SendBackward, mb});
  }
  // Both halves talk to the next stage: on the last stage the pair vanishes.
  void send_forward_recv_backward(int send_mb, int recv_mb) {
    if (!last_) add({PipelineOp::SendForwardRecvBackward, send_mb, recv_mb});
  }
  // Both halves talk to the previous stage: on the first stage the pair vanishes.
  void send_backward_recv_forward(int send_mb, int recv_mb) {
    if (!first_) add({PipelineOp::SendBackwardRecvForward, send_mb, recv_mb});
  }

  std::vector<PipelineAction> take() { return std::move(actions_); }

 private:
  void add(PipelineAction a) { actions_.push_back(a); }
  bool first_, last_;
  std::vector<PipelineAction> actions_;
};

std::vector<PipelineAction> gpipe(int stages, int stage, int m) {
  Builder b(stages, stage);
  for (int i = 0; i < m; ++i) {
    b.recv_forward(i);
    b.forward(i);
    b.send_forward(i);
  }
  for (int i = 0; i < m; ++i) {
    b.recv_backward(i);
    b.backward(i);
    b.send_backward(i);
  }
  return b.take();
}

std::vector<PipelineAction> one_f_one_b(int stages, int stage, int m) {
  Builder b(stages, stage);
  const int warmup = std::min(stages - stage - 1, m);
  const int steady = m - warmup;
  for (int i = 0; i < warmup; ++i) {
    b.recv_forward(i);
    b.forward(i);
    b.send_forward(i);
  }
  if (steady > 0) b.recv_forward(warmup);
  for (int i = 0; i < steady; ++i) {
    const int fwd = warmup + i;  // the forward of this steady iteration
    const int bwd = i;           // the backward of this steady iteration
    b.forward(fwd);
    b.send_forward_recv_backward(fwd, bwd);
    b.backward(bwd);
    if (i == steady - 1) {
      b.send_backward(bwd);
    } else {
      b.send_backward_recv_forward(bwd, fwd + 1);
    }
  }
  for (int i = steady; i < m; ++i) {
    b.recv_backward(i);
    b.backward(i);
    b.send_backward(i);
  }
  return b.take();
}

}  // namespace

std::vector<PipelineAction> pipeline_schedule(PipelineScheduleKind kind, int stages, int stage, int micro_batches) {
  if (stages < 1) throw UsageError("pipeline schedule: the number of stages must be >= 1");
  if (stage < 0 || stage >= stages)
    throw UsageError("pipeline schedule: stage " + std::to_string(stage) + " is outside [0, " + std::to_string(stages) +
                     ")");
  if (micro_batches < 1) throw UsageError("pipeline schedule: the number of micro-batches must be >= 1");
  return kind == PipelineScheduleKind::GPipe ? gpipe(stages, stage, micro_batches)
                                             : one_f_one_b(stages, stage, micro_batches);
}

PipelineScheduleKind parse_pipeline_schedule(const std::string& text) {
  if (text == "1f1b") return PipelineScheduleKind::OneFOneB;
  if (text == "gpipe") return PipelineScheduleKind::GPipe;
  throw UsageError("unknown pipeline schedule '" + text + "': use 1f1b or gpipe");
}

std::string to_string(const PipelineAction& a) {
  const std::string mb = std::to_string(a.micro_batch);
  const std::string peer = std::to_string(a.peer_micro_batch);
  switch (a.op) {
    case PipelineOp::RecvForward:
      return "RecvFwd" + mb;
    case PipelineOp::Forward:
      return "F" + mb;
    case PipelineOp::SendForward:
      return "SendFwd" + mb;
    case PipelineOp::RecvBackward:
      return "RecvBwd" + mb;
    case PipelineOp::Backward:
      return "B" + mb;
    case PipelineOp::SendBackward:
      return "SendBwd" + mb;
    case PipelineOp::SendForwardRecvBackward:
      return "SendFwd" + mb + "+RecvBwd" + peer;
    case PipelineOp::SendBackwardRecvForward:
      return "SendBwd" + mb + "+RecvFwd" + peer;
  }
  return "?";
}

}  // namespace tenax
