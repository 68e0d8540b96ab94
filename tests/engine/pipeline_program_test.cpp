// Pipeline programs: every schedule, for up to 8 stages and 4 virtual stages, runs to completion under rendezvous
// semantics without deadlock, computes every (micro-batch, virtual stage) forward and backward once in dependency
// order, and keeps the activation footprint the schedule promises.
#include <gtest/gtest.h>

#include <algorithm>

#include "tenax/error.hpp"
#include "tenax/pipeline_program.hpp"

namespace tenax {
namespace {

TEST(PipelineProgram, EveryScheduleCompletesWithoutDeadlock) {
  int checked = 0;
  for (PipelineKind kind : {PipelineKind::GPipe, PipelineKind::OneFOneB, PipelineKind::Interleaved})
    for (int pp = 1; pp <= 8; ++pp)
      for (int v = 1; v <= (kind == PipelineKind::Interleaved ? 4 : 1); ++v)
        for (int m = 1; m <= 24; ++m) {
          const PipelineSpec spec{kind, pp, v, m};
          if (kind == PipelineKind::Interleaved && m % pp != 0) {
            EXPECT_THROW(spec.validate(), UsageError);
            continue;
          }
          const PipelineSimulation sim = simulate_pipeline(spec);
          EXPECT_TRUE(sim.completed) << to_string(kind) << " pp=" << pp << " v=" << v << " m=" << m << ": "
                                     << sim.problem;
          ++checked;
        }
  // GPipe and 1F1B: 8 x 24 each; interleaved: the multiples of pp up to 24 (24+12+8+6+4+4+3+3 = 64) for 4 v's.
  EXPECT_EQ(checked, 2 * 8 * 24 + 64 * 4);
}

TEST(PipelineProgram, ActivationFootprint) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int m = 1; m <= 12; ++m) {
      const PipelineSpec gpipe{PipelineKind::GPipe, pp, 1, m}, ofob{PipelineKind::OneFOneB, pp, 1, m};
      for (int s = 0; s < pp; ++s) {
        EXPECT_EQ(activation_slots(pipeline_program(gpipe, s), gpipe, 0), m);
        EXPECT_EQ(activation_slots(pipeline_program(ofob, s), ofob, 0), std::min(m, pp - s)) << pp << " " << m;
      }
    }
  // Interleaved: a stage holds at most its warm-up forwards plus one, over all its chunks, however many micro-batches
  // the step has (GPipe would hold all of them).
  for (int pp : {2, 4})
    for (int v : {2, 3})
      for (int m : {pp * 4, pp * 8}) {
        const PipelineSpec il{PipelineKind::Interleaved, pp, v, m};
        for (int s = 0; s < pp; ++s) {
          int alive = 0, most = 0;  // over all chunks at once
          for (const PipelineStep& step : pipeline_program(il, s)) {
            if (step.kind == PipelineStep::Kind::Exchange) continue;
            alive += step.kind == PipelineStep::Kind::Forward ? 1 : -1;
            most = std::max(most, alive);
          }
          EXPECT_LE(most, (pp - s - 1) * 2 + (v - 1) * pp + 1) << pp << " " << v << " " << m << " stage " << s;
        }
      }
}

TEST(PipelineProgram, OneFOneBShape) {
  // Stage 0 of 4 with 6 micro-batches: 3 warm-up forwards, then F/B alternating, then 3 backwards.
  const PipelineSpec spec{PipelineKind::OneFOneB, 4, 1, 6};
  std::string computes;
  for (const PipelineStep& s : pipeline_program(spec, 0))
    if (s.kind != PipelineStep::Kind::Exchange) computes += to_string(s) + " ";
  EXPECT_EQ(computes, "F0@v0 F1@v0 F2@v0 F3@v0 B0@v0 F4@v0 B1@v0 F5@v0 B2@v0 B3@v0 B4@v0 B5@v0 ");
  // Transfers pair the send of one step with the receive of the next: stage 1 sends an activation and receives a
  // gradient in one exchange.
  bool paired = false;
  for (const PipelineStep& s : pipeline_program(spec, 1))
    if (s.kind == PipelineStep::Kind::Exchange && s.transfers.size() == 2 && s.transfers[0].send &&
        !s.transfers[1].send)
      paired = true;
  EXPECT_TRUE(paired);
}

TEST(PipelineProgram, TheSimulatorFindsDeadlocksAndMissingInputs) {
  // One exchange per compute step in the interleaved steady phase (instead of one per forward-backward pair) is a
  // real deadlock: rebuild every stage's program with, before each compute step, the sends of the step before it and
  // the receive of its own input.
  const PipelineSpec spec{PipelineKind::Interleaved, 2, 2, 4};
  std::vector<std::vector<PipelineStep>> programs{pipeline_program(spec, 0), pipeline_program(spec, 1)};
  ASSERT_TRUE(simulate_programs(spec, programs).completed);
  auto consumed_by = [](const PipelineTransfer& t, const PipelineStep& s) {
    const bool act = t.kind == PipelineTransfer::Kind::Activation;
    return s.micro_batch == t.micro_batch &&
           (act ? s.kind == PipelineStep::Kind::Forward && s.virtual_stage == t.virtual_stage + 1
                : s.kind == PipelineStep::Kind::Backward && s.virtual_stage == t.virtual_stage - 1);
  };
  auto produced_by = [](const PipelineTransfer& t, const PipelineStep& s) {
    const bool act = t.kind == PipelineTransfer::Kind::Activation;
    return s.micro_batch == t.micro_batch && s.virtual_stage == t.virtual_stage &&
           s.kind == (act ? PipelineStep::Kind::Forward : PipelineStep::Kind::Backward);
  };
  auto changed = programs;
  for (auto& program : changed) {
    std::vector<PipelineTransfer> all;
    std::vector<PipelineStep> computes;
    for (const PipelineStep& s : program)
      (s.kind == PipelineStep::Kind::Exchange ? (void)all.insert(all.end(), s.transfers.begin(), s.transfers.end())
                                              : computes.push_back(s));
    std::vector<PipelineStep> rebuilt;
    const PipelineStep* previous = nullptr;
    for (const PipelineStep& c : computes) {
      PipelineStep x{PipelineStep::Kind::Exchange, 0, 0, {}};
      for (const PipelineTransfer& t : all)
        if ((t.send && previous && produced_by(t, *previous)) || (!t.send && consumed_by(t, c)))
          x.transfers.push_back(t);
      if (!x.transfers.empty()) rebuilt.push_back(x);
      rebuilt.push_back(c);
      previous = &c;
    }
    PipelineStep last{PipelineStep::Kind::Exchange, 0, 0, {}};
    for (const PipelineTransfer& t : all)
      if (t.send && produced_by(t, *previous)) last.transfers.push_back(t);
    if (!last.transfers.empty()) rebuilt.push_back(last);
    program = rebuilt;
  }
  const PipelineSimulation sim = simulate_programs(spec, changed);
  EXPECT_FALSE(sim.completed);
  EXPECT_NE(sim.problem.find("deadlock"), std::string::npos) << sim.problem;

  // A forward moved before the exchange that brings its input.
  changed = programs;
  auto& p1 = changed[1];
  auto first_forward =
      std::find_if(p1.begin(), p1.end(), [](const PipelineStep& s) { return s.kind == PipelineStep::Kind::Forward; });
  ASSERT_NE(first_forward, p1.end());
  std::rotate(p1.begin(), first_forward, first_forward + 1);
  const PipelineSimulation early = simulate_programs(spec, changed);
  EXPECT_FALSE(early.completed);
  EXPECT_NE(early.problem.find("before its input arrived"), std::string::npos) << early.problem;
}

TEST(PipelineProgram, RefusesBadSpecs) {
  EXPECT_THROW((PipelineSpec{PipelineKind::OneFOneB, 2, 2, 4}).validate(), UsageError);
  EXPECT_THROW((PipelineSpec{PipelineKind::Interleaved, 4, 2, 6}).validate(), UsageError);
  EXPECT_THROW((PipelineSpec{PipelineKind::GPipe, 0, 1, 4}).validate(), UsageError);
  EXPECT_THROW(pipeline_program(PipelineSpec{PipelineKind::GPipe, 2, 1, 4}, 2), UsageError);
  EXPECT_THROW(parse_pipeline_kind("zigzag"), UsageError);
  EXPECT_EQ(parse_pipeline_kind("interleaved"), PipelineKind::Interleaved);
}

}  // namespace
}  // namespace tenax
