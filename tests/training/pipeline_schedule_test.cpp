// The pipeline schedules as pure data, and a simulation of all stages executing them with rendezvous semantics (a
// send completes only when the peer posts the matching receive, the strictest thing an MPI or NCCL transport may do):
// it must finish without deadlock, every message must carry the micro-batch the receiver expects, and 1F1B must bound
// the activations alive per stage.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "tenax/error.hpp"
#include "tenax/pipeline_schedule.hpp"

namespace tenax {
namespace {

std::string join(const std::vector<PipelineAction>& actions) {
  std::string s;
  for (const auto& a : actions)
    s += (s.empty() ? "" : " ") + to_string(a);
  return s;
}

TEST(PipelineSchedule, OneFOneBFirstStageOfFourWithSixMicroBatches) {
  EXPECT_EQ(join(pipeline_schedule(PipelineScheduleKind::OneFOneB, 4, 0, 6)),
            "F0 SendFwd0 F1 SendFwd1 F2 SendFwd2 F3 SendFwd3+RecvBwd0 B0 F4 SendFwd4+RecvBwd1 B1 F5 "
            "SendFwd5+RecvBwd2 B2 RecvBwd3 B3 RecvBwd4 B4 RecvBwd5 B5");
}

TEST(PipelineSchedule, OneFOneBLastStageAlternatesFromTheStart) {
  EXPECT_EQ(join(pipeline_schedule(PipelineScheduleKind::OneFOneB, 4, 3, 3)),
            "RecvFwd0 F0 B0 SendBwd0+RecvFwd1 F1 B1 SendBwd1+RecvFwd2 F2 B2 SendBwd2");
}

TEST(PipelineSchedule, OneFOneBMiddleStage) {
  EXPECT_EQ(join(pipeline_schedule(PipelineScheduleKind::OneFOneB, 3, 1, 3)),
            "RecvFwd0 F0 SendFwd0 RecvFwd1 F1 SendFwd1+RecvBwd0 B0 SendBwd0+RecvFwd2 F2 SendFwd2+RecvBwd1 B1 "
            "SendBwd1 RecvBwd2 B2 SendBwd2");
}

TEST(PipelineSchedule, GPipeRunsAllForwardsThenAllBackwards) {
  EXPECT_EQ(join(pipeline_schedule(PipelineScheduleKind::GPipe, 2, 0, 3)),
            "F0 SendFwd0 F1 SendFwd1 F2 SendFwd2 RecvBwd0 B0 RecvBwd1 B1 RecvBwd2 B2");
  EXPECT_EQ(join(pipeline_schedule(PipelineScheduleKind::GPipe, 2, 1, 2)),
            "RecvFwd0 F0 RecvFwd1 F1 B0 SendBwd0 B1 SendBwd1");
}

TEST(PipelineSchedule, SingleStageHasNoCommunication) {
  EXPECT_EQ(join(pipeline_schedule(PipelineScheduleKind::OneFOneB, 1, 0, 3)), "F0 B0 F1 B1 F2 B2");
}

TEST(PipelineSchedule, RejectsBadArguments) {
  EXPECT_THROW(pipeline_schedule(PipelineScheduleKind::OneFOneB, 0, 0, 1), UsageError);
  EXPECT_THROW(pipeline_schedule(PipelineScheduleKind::OneFOneB, 2, 2, 1), UsageError);
  EXPECT_THROW(pipeline_schedule(PipelineScheduleKind::GPipe, 2, -1, 1), UsageError);
  EXPECT_THROW(pipeline_schedule(PipelineScheduleKind::GPipe, 2, 0, 0), UsageError);
  EXPECT_THROW(parse_pipeline_schedule("interleaved"), UsageError);
  EXPECT_EQ(parse_pipeline_schedule("gpipe"), PipelineScheduleKind::GPipe);
}

// ---- simulation ----

enum class Kind { Activation, Gradient };

struct Half {
  int peer;
  bool send;
  Kind kind;
  int micro_batch;
};

std::vector<Half> halves(const PipelineAction& a, int stage) {
  switch (a.op) {
    case PipelineOp::RecvForward:
      return {{stage - 1, false, Kind::Activation, a.micro_batch}};
    case PipelineOp::SendForward:
      return {{stage + 1, true, Kind::Activation, a.micro_batch}};
    case PipelineOp::RecvBackward:
      return {{stage + 1, false, Kind::Gradient, a.micro_batch}};
    case PipelineOp::SendBackward:
      return {{stage - 1, true, Kind::Gradient, a.micro_batch}};
    case PipelineOp::SendForwardRecvBackward:
      return {{stage + 1, true, Kind::Activation, a.micro_batch},
              {stage + 1, false, Kind::Gradient, a.peer_micro_batch}};
    case PipelineOp::SendBackwardRecvForward:
      return {{stage - 1, true, Kind::Gradient, a.micro_batch},
              {stage - 1, false, Kind::Activation, a.peer_micro_batch}};
    case PipelineOp::Forward:
    case PipelineOp::Backward:
      break;
  }
  return {};
}

struct StageState {
  std::vector<PipelineAction> actions;
  std::size_t pc = 0;
  std::vector<bool> matched;  // halves of actions[pc]
  std::vector<bool> has_activation, has_gradient, forwarded, backwarded;
  int in_flight = 0, max_in_flight = 0;
};

void simulate(PipelineScheduleKind kind, int stages, int m) {
  SCOPED_TRACE("stages " + std::to_string(stages) + ", micro-batches " + std::to_string(m));
  std::vector<StageState> st(static_cast<std::size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    StageState& x = st[static_cast<std::size_t>(s)];
    x.actions = pipeline_schedule(kind, stages, s, m);
    x.has_activation.assign(static_cast<std::size_t>(m), s == 0);         // the first stage reads its input locally
    x.has_gradient.assign(static_cast<std::size_t>(m), s == stages - 1);  // the last stage starts from the loss
    x.forwarded.assign(static_cast<std::size_t>(m), false);
    x.backwarded.assign(static_cast<std::size_t>(m), false);
  }
  auto current_halves = [&](int s) {
    StageState& x = st[static_cast<std::size_t>(s)];
    return x.pc < x.actions.size() ? halves(x.actions[x.pc], s) : std::vector<Half>{};
  };
  for (auto& x : st)
    x.matched.assign(x.actions.empty() ? 0 : halves(x.actions[0], int(&x - &st[0])).size(), false);

  for (;;) {
    bool progress = false, done = true;
    for (int s = 0; s < stages; ++s) {
      StageState& x = st[static_cast<std::size_t>(s)];
      if (x.pc >= x.actions.size()) continue;
      done = false;
      const PipelineAction& a = x.actions[x.pc];
      const auto mb = static_cast<std::size_t>(a.micro_batch);
      bool complete = false;
      if (a.op == PipelineOp::Forward) {
        ASSERT_TRUE(x.has_activation[mb]) << "stage " << s << " runs F" << mb << " before receiving its input";
        ASSERT_FALSE(x.forwarded[mb]);
        x.forwarded[mb] = true;
        x.max_in_flight = std::max(x.max_in_flight, ++x.in_flight);
        complete = true;
      } else if (a.op == PipelineOp::Backward) {
        ASSERT_TRUE(x.forwarded[mb]) << "stage " << s << " runs B" << mb << " before F" << mb;
        ASSERT_TRUE(x.has_gradient[mb]) << "stage " << s << " runs B" << mb << " before receiving its gradient";
        ASSERT_FALSE(x.backwarded[mb]);
        x.backwarded[mb] = true;
        --x.in_flight;
        complete = true;
      } else {
        const std::vector<Half> mine = halves(a, s);
        for (std::size_t h = 0; h < mine.size(); ++h) {
          if (x.matched[h]) continue;
          ASSERT_TRUE(mine[h].peer >= 0 && mine[h].peer < stages)
              << "stage " << s << " talks to stage " << mine[h].peer;
          StageState& y = st[static_cast<std::size_t>(mine[h].peer)];
          const std::vector<Half> theirs = current_halves(mine[h].peer);
          for (std::size_t k = 0; k < theirs.size(); ++k) {
            if (y.matched[k] || theirs[k].peer != s || theirs[k].send == mine[h].send || theirs[k].kind != mine[h].kind)
              continue;
            // Transports match messages by order, not by content: the micro-batches must agree.
            ASSERT_EQ(theirs[k].micro_batch, mine[h].micro_batch)
                << "stage " << s << " " << to_string(a) << " meets stage " << mine[h].peer << " "
                << to_string(y.actions[y.pc]);
            x.matched[h] = y.matched[k] = true;
            const Half& recv = mine[h].send ? theirs[k] : mine[h];
            StageState& receiver = mine[h].send ? y : x;
            auto& got = recv.kind == Kind::Activation ? receiver.has_activation : receiver.has_gradient;
            got[static_cast<std::size_t>(recv.micro_batch)] = true;
            progress = true;
            break;
          }
        }
        complete = std::all_of(x.matched.begin(), x.matched.end(), [](bool b) { return b; });
      }
      if (complete) {
        ++x.pc;
        x.matched.assign(x.pc < x.actions.size() ? halves(x.actions[x.pc], s).size() : 0, false);
        progress = true;
      }
    }
    if (done) break;
    if (!progress) {
      std::string stuck;
      for (int s = 0; s < stages; ++s) {
        const StageState& x = st[static_cast<std::size_t>(s)];
        stuck += " stage" + std::to_string(s) + ":" + (x.pc < x.actions.size() ? to_string(x.actions[x.pc]) : "done");
      }
      FAIL() << "deadlock:" << stuck;
    }
  }
  for (int s = 0; s < stages; ++s) {
    const StageState& x = st[static_cast<std::size_t>(s)];
    for (int mb = 0; mb < m; ++mb) {
      EXPECT_TRUE(x.forwarded[static_cast<std::size_t>(mb)]);
      EXPECT_TRUE(x.backwarded[static_cast<std::size_t>(mb)]);
    }
    if (kind == PipelineScheduleKind::OneFOneB)
      EXPECT_LE(x.max_in_flight, std::min(m, stages - s)) << "stage " << s << " holds too many activations";
    else
      EXPECT_EQ(x.max_in_flight, m);
  }
}

class ScheduleSimulation : public ::testing::TestWithParam<std::tuple<PipelineScheduleKind, int, int>> {};

TEST_P(ScheduleSimulation, CompletesWithoutDeadlockAndMatchesMicroBatches) {
  const auto [kind, stages, m] = GetParam();
  simulate(kind, stages, m);
}

INSTANTIATE_TEST_SUITE_P(AllSmallShapes, ScheduleSimulation,
                         ::testing::Combine(::testing::Values(PipelineScheduleKind::OneFOneB,
                                                              PipelineScheduleKind::GPipe),
                                            ::testing::Range(1, 6), ::testing::Range(1, 9)));

}  // namespace
}  // namespace tenax
