// Pipeline schedules as programs: for one pipeline stage, the ordered list of compute steps (the forward or backward
// of one micro-batch through one model chunk) and exchanges (batches of point-to-point transfers, posted together and
// completed together) that run one optimizer step's micro-batches through the pipeline. Pure functions: no
// communication, so the schedules are tested on their own, including a simulation of every stage under rendezvous
// semantics (a transfer completes only while its peer's matching transfer is posted) that shows they cannot deadlock.
//
// Virtual stages: the model is cut into stages * virtual_stages consecutive parts. Part v ("virtual stage v") lives on
// pipeline stage v % stages as that stage's model chunk v / stages. With one virtual stage per stage this is the usual
// pipeline; with more (the interleaved schedule, Megatron's virtual pipeline) each stage holds several non-adjacent
// parts, which shrinks the pipeline bubble by that factor at the cost of more transfers.
//
//   GPipe        every forward, then every backward (holds every micro-batch's activations).
//   1F1B         (PipeDream-Flush) stages - stage - 1 warm-up forwards, then one forward and one backward alternately,
//                then the remaining backwards: at most stages - stage micro-batches' activations alive at once.
//   Interleaved  1F1B over virtual stages (Megatron's order): forwards visit the chunks in groups of `stages`
//                micro-batches; warm-up (stages - stage - 1) * 2 + (virtual_stages - 1) * stages forwards; in the
//                steady phase a forward and a backward share one exchange. Needs micro_batches % stages == 0.
//
// Exchanges: before each compute step (or each forward-backward pair, interleaved) one exchange sends the previous
// step's output and receives the next step's input. Transfers between two chunks of the same stage are not in the
// program: the executor hands those tensors over in memory. Within one ordered pair of stages, sends and receives
// appear in the same order on both sides, so the program also runs on transports that match messages in order (NCCL).
#pragma once

#include <string>
#include <vector>

namespace tenax {

enum class PipelineKind { GPipe, OneFOneB, Interleaved };

// "gpipe", "1f1b" or "interleaved"; throws UsageError naming the choices.
PipelineKind parse_pipeline_kind(const std::string& text);
std::string to_string(PipelineKind kind);

struct PipelineSpec {
  PipelineKind kind = PipelineKind::OneFOneB;
  int stages = 1;          // pipeline-parallel ranks
  int virtual_stages = 1;  // model chunks per stage (more than 1: Interleaved only)
  int micro_batches = 1;   // per optimizer step

  int total_virtual_stages() const { return stages * virtual_stages; }
  int stage_of(int virtual_stage) const { return virtual_stage % stages; }
  int chunk_of(int virtual_stage) const { return virtual_stage / stages; }
  // Throws UsageError naming the problem and the fix.
  void validate() const;
};

struct PipelineTransfer {
  enum class Kind { Activation, Gradient };
  Kind kind = Kind::Activation;
  bool send = true;  // false: receive
  int peer = 0;      // the other pipeline stage
  int micro_batch = 0;
  int virtual_stage = 0;  // the virtual stage whose compute produced the tensor
  friend bool operator==(const PipelineTransfer&, const PipelineTransfer&) = default;
};

struct PipelineStep {
  enum class Kind { Forward, Backward, Exchange };
  Kind kind = Kind::Forward;
  int micro_batch = 0;                      // Forward / Backward
  int virtual_stage = 0;                    // Forward / Backward
  std::vector<PipelineTransfer> transfers;  // Exchange
};

// Stage `stage`'s program for one optimizer step. Throws UsageError for an invalid spec or stage.
std::vector<PipelineStep> pipeline_program(const PipelineSpec& spec, int stage);

// The most micro-batches whose forward through chunk `chunk` has run and whose backward has not, at any point of the
// program: how many activation slots the chunk needs.
int activation_slots(const std::vector<PipelineStep>& program, const PipelineSpec& spec, int chunk);

struct PipelineSimulation {
  bool completed = false;
  std::string problem;  // why not: a deadlock (each stage's blocked step), a missing or unmatched transfer, ...
};
// Runs every stage's program together under rendezvous semantics and checks that each compute step's inputs were
// produced (and received, across stages) before it, that every transfer is matched exactly once, and that each
// ordered pair of stages sends and receives in the same order.
PipelineSimulation simulate_pipeline(const PipelineSpec& spec);
// The same for given programs (one per stage), e.g. to show that a changed program would deadlock.
PipelineSimulation simulate_programs(const PipelineSpec& spec, const std::vector<std::vector<PipelineStep>>& programs);

std::string to_string(const PipelineStep& step);  // "F3@v2", "B0@v1", "X[send A3@v0 ->1, recv G2@v1 <-1]"

}  // namespace tenax
