#include "tenax/pipeline_program.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "tenax/error.hpp"

namespace tenax {
namespace {

struct Unit {
  bool forward;
  int micro_batch;
  int virtual_stage;
};

// The compute order of one stage.
std::vector<Unit> compute_order(const PipelineSpec& s, int stage) {
  const int m = s.micro_batches, pp = s.stages, v = s.virtual_stages;
  std::vector<Unit> order;
  if (s.kind == PipelineKind::GPipe) {
    for (int mb = 0; mb < m; ++mb)
      order.push_back({true, mb, stage});
    for (int mb = 0; mb < m; ++mb)
      order.push_back({false, mb, stage});
    return order;
  }
  if (s.kind == PipelineKind::OneFOneB) {
    const int warmup = std::min(pp - stage - 1, m);
    for (int mb = 0; mb < warmup; ++mb)
      order.push_back({true, mb, stage});
    for (int i = 0; i < m - warmup; ++i) {
      order.push_back({true, warmup + i, stage});
      order.push_back({false, i, stage});
    }
    for (int mb = m - warmup; mb < m; ++mb)
      order.push_back({false, mb, stage});
    return order;
  }
  // Interleaved (Megatron): the k-th forward of a stage runs micro-batch (k / (pp v)) pp + k % pp through chunk
  // (k mod pp v) / pp; backwards visit the chunks in the opposite order.
  auto forward_unit = [&](int k) {
    const int chunk = (k % (pp * v)) / pp;
    return Unit{true, (k / (pp * v)) * pp + k % pp, chunk * pp + stage};
  };
  auto backward_unit = [&](int k) {
    const int chunk = v - 1 - (k % (pp * v)) / pp;
    return Unit{false, (k / (pp * v)) * pp + k % pp, chunk * pp + stage};
  };
  const int total = m * v;
  const int warmup = std::min((pp - stage - 1) * 2 + (v - 1) * pp, total);
  for (int k = 0; k < warmup; ++k)
    order.push_back(forward_unit(k));
  for (int i = 0; i < total - warmup; ++i) {
    order.push_back(forward_unit(warmup + i));
    order.push_back(backward_unit(i));
  }
  for (int k = total - warmup; k < total; ++k)
    order.push_back(backward_unit(k));
  return order;
}

}  // namespace

PipelineKind parse_pipeline_kind(const std::string& text) {
  if (text == "gpipe") return PipelineKind::GPipe;
  if (text == "1f1b") return PipelineKind::OneFOneB;
  if (text == "interleaved") return PipelineKind::Interleaved;
  throw UsageError("pipeline schedule '" + text + "' is not one of gpipe, 1f1b, interleaved");
}

std::string to_string(PipelineKind kind) {
  switch (kind) {
    case PipelineKind::GPipe:
      return "gpipe";
    case PipelineKind::OneFOneB:
      return "1f1b";
    case PipelineKind::Interleaved:
      return "interleaved";
  }
  return "?";
}

void PipelineSpec::validate() const {
  if (stages < 1) throw UsageError("pipeline: " + std::to_string(stages) + " stages; there must be at least 1");
  if (micro_batches < 1)
    throw UsageError("pipeline: " + std::to_string(micro_batches) +
                     " micro-batches per step; there must be at least 1");
  if (virtual_stages < 1)
    throw UsageError("pipeline: " + std::to_string(virtual_stages) + " virtual stages per stage; at least 1");
  if (kind != PipelineKind::Interleaved && virtual_stages != 1)
    throw UsageError("pipeline: " + std::to_string(virtual_stages) +
                     " virtual stages per stage need the interleaved "
                     "schedule (the " +
                     to_string(kind) + " schedule runs one model chunk per stage)");
  if (kind == PipelineKind::Interleaved && micro_batches % stages != 0)
    throw UsageError("pipeline: the interleaved schedule runs micro-batches in groups of one per stage, but " +
                     std::to_string(micro_batches) + " micro-batches are not a multiple of " + std::to_string(stages) +
                     " stages; choose a batch that gives a multiple of " + std::to_string(stages) +
                     " micro-batches per data-parallel rank");
  if (static_cast<long long>(stages) * virtual_stages * micro_batches > (1LL << 24))
    throw UsageError("pipeline: stages x virtual stages x micro-batches = " +
                     std::to_string(static_cast<long long>(stages) * virtual_stages * micro_batches) +
                     " is beyond what one step can schedule (16777216)");
}

std::vector<PipelineStep> pipeline_program(const PipelineSpec& spec, int stage) {
  spec.validate();
  if (stage < 0 || stage >= spec.stages)
    throw UsageError("pipeline: stage " + std::to_string(stage) + " is outside [0, " + std::to_string(spec.stages) +
                     ")");
  const int total_v = spec.total_virtual_stages();
  const std::vector<Unit> order = compute_order(spec, stage);
  using Kind = PipelineTransfer::Kind;
  auto receive_for = [&](const Unit& u, std::vector<PipelineTransfer>& out) {
    if (u.forward && u.virtual_stage > 0 && spec.stage_of(u.virtual_stage - 1) != stage)
      out.push_back({Kind::Activation, false, spec.stage_of(u.virtual_stage - 1), u.micro_batch, u.virtual_stage - 1});
    if (!u.forward && u.virtual_stage < total_v - 1 && spec.stage_of(u.virtual_stage + 1) != stage)
      out.push_back({Kind::Gradient, false, spec.stage_of(u.virtual_stage + 1), u.micro_batch, u.virtual_stage + 1});
  };
  auto send_of = [&](const Unit& u, std::vector<PipelineTransfer>& out) {
    if (u.forward && u.virtual_stage < total_v - 1 && spec.stage_of(u.virtual_stage + 1) != stage)
      out.push_back({Kind::Activation, true, spec.stage_of(u.virtual_stage + 1), u.micro_batch, u.virtual_stage});
    if (!u.forward && u.virtual_stage > 0 && spec.stage_of(u.virtual_stage - 1) != stage)
      out.push_back({Kind::Gradient, true, spec.stage_of(u.virtual_stage - 1), u.micro_batch, u.virtual_stage});
  };
  // Blocks of compute that share one exchange before them: single steps, except the interleaved steady phase, where a
  // forward and a backward run between two exchanges (each exchange then talks to both neighbours, which is what keeps
  // every stage moving together; a program with one exchange per step deadlocks there).
  std::vector<std::vector<Unit>> blocks;
  if (spec.kind == PipelineKind::Interleaved) {
    const int total = spec.micro_batches * spec.virtual_stages;
    const int warmup = std::min((spec.stages - stage - 1) * 2 + (spec.virtual_stages - 1) * spec.stages, total);
    std::size_t i = 0;
    for (; i < static_cast<std::size_t>(warmup); ++i)
      blocks.push_back({order[i]});
    for (int pair = 0; pair < total - warmup; ++pair, i += 2)
      blocks.push_back({order[i], order[i + 1]});
    for (; i < order.size(); ++i)
      blocks.push_back({order[i]});
  } else {
    for (const Unit& u : order)
      blocks.push_back({u});
  }
  std::vector<PipelineStep> program;
  std::vector<PipelineTransfer> pending;  // sends of the previous block
  for (const auto& block : blocks) {
    std::vector<PipelineTransfer> exchange = std::move(pending);
    pending.clear();
    for (const Unit& u : block)
      receive_for(u, exchange);
    if (!exchange.empty()) program.push_back({PipelineStep::Kind::Exchange, 0, 0, std::move(exchange)});
    for (const Unit& u : block) {
      program.push_back(
          {u.forward ? PipelineStep::Kind::Forward : PipelineStep::Kind::Backward, u.micro_batch, u.virtual_stage, {}});
      send_of(u, pending);
    }
  }
  if (!pending.empty()) program.push_back({PipelineStep::Kind::Exchange, 0, 0, std::move(pending)});
  return program;
}

int activation_slots(const std::vector<PipelineStep>& program, const PipelineSpec& spec, int chunk) {
  int alive = 0, most = 0;
  for (const PipelineStep& s : program) {
    if (s.kind == PipelineStep::Kind::Exchange || spec.chunk_of(s.virtual_stage) != chunk) continue;
    alive += s.kind == PipelineStep::Kind::Forward ? 1 : -1;
    most = std::max(most, alive);
  }
  return most;
}

std::string to_string(const PipelineStep& step) {
  auto unit = [](char what, int mb, int vs) {
    return std::string(1, what) + std::to_string(mb) + "@v" + std::to_string(vs);
  };
  if (step.kind == PipelineStep::Kind::Forward) return unit('F', step.micro_batch, step.virtual_stage);
  if (step.kind == PipelineStep::Kind::Backward) return unit('B', step.micro_batch, step.virtual_stage);
  std::string out = "X[";
  for (std::size_t i = 0; i < step.transfers.size(); ++i) {
    const PipelineTransfer& t = step.transfers[i];
    if (i) out += ", ";
    out += (t.send ? "send " : "recv ") +
           unit(t.kind == PipelineTransfer::Kind::Activation ? 'A' : 'G', t.micro_batch, t.virtual_stage) +
           (t.send ? " ->" : " <-") + std::to_string(t.peer);
  }
  return out + "]";
}

PipelineSimulation simulate_pipeline(const PipelineSpec& spec) {
  std::vector<std::vector<PipelineStep>> programs;
  for (int s = 0; s < spec.stages; ++s)
    programs.push_back(pipeline_program(spec, s));
  return simulate_programs(spec, programs);
}

PipelineSimulation simulate_programs(const PipelineSpec& spec, const std::vector<std::vector<PipelineStep>>& programs) {
  PipelineSimulation result;
  const int pp = spec.stages, total_v = spec.total_virtual_stages();
  if (static_cast<int>(programs.size()) != pp) {
    result.problem = std::to_string(programs.size()) + " programs for " + std::to_string(pp) + " stages";
    return result;
  }
  using Key = std::tuple<bool, int, int>;  // (forward, micro-batch, virtual stage)
  std::set<Key> computed;
  // (from, to, kind, micro-batch, virtual stage) for transfers whose data has arrived at `to`.
  using Wire = std::tuple<int, int, int, int, int>;
  std::set<Wire> delivered;
  std::vector<std::size_t> pos(pp, 0);
  std::vector<std::set<std::size_t>> done_in_exchange(pp);  // transfers of the current exchange that completed
  auto wire_of = [](int self, const PipelineTransfer& t) {
    return t.send ? Wire{self, t.peer, static_cast<int>(t.kind), t.micro_batch, t.virtual_stage}
                  : Wire{t.peer, self, static_cast<int>(t.kind), t.micro_batch, t.virtual_stage};
  };
  auto fail = [&](const std::string& why) {
    result.problem = why;
    return result;
  };
  while (true) {
    bool moved = false;
    for (int s = 0; s < pp; ++s) {
      while (pos[s] < programs[s].size()) {
        const PipelineStep& step = programs[s][pos[s]];
        if (step.kind != PipelineStep::Kind::Exchange) {
          const bool fwd = step.kind == PipelineStep::Kind::Forward;
          const int vs = step.virtual_stage, mb = step.micro_batch;
          if (spec.stage_of(vs) != s)
            return fail("stage " + std::to_string(s) + " runs " + to_string(step) + " of another stage");
          if (computed.count({fwd, mb, vs}))
            return fail("stage " + std::to_string(s) + " runs " + to_string(step) + " twice");
          // Inputs: the previous virtual stage's forward (activation) or the next one's backward (gradient), received
          // when they were computed on another stage; a backward also needs its own forward.
          const int from = fwd ? vs - 1 : vs + 1;
          if (from >= 0 && from < total_v) {
            if (!computed.count({fwd, mb, from}))
              return fail("stage " + std::to_string(s) + " runs " + to_string(step) + " before its input was computed");
            if (spec.stage_of(from) != s && !delivered.count(Wire{spec.stage_of(from), s, fwd ? 0 : 1, mb, from}))
              return fail("stage " + std::to_string(s) + " runs " + to_string(step) + " before its input arrived");
          }
          if (!fwd && !computed.count({true, mb, vs}))
            return fail("stage " + std::to_string(s) + " runs " + to_string(step) + " before its forward");
          computed.insert({fwd, mb, vs});
          ++pos[s];
          moved = true;
          continue;
        }
        // An exchange: a transfer completes while the peer's current step is an exchange holding its match.
        for (std::size_t i = 0; i < step.transfers.size(); ++i) {
          if (done_in_exchange[s].count(i)) continue;
          const PipelineTransfer& t = step.transfers[i];
          if (t.peer == s) return fail("stage " + std::to_string(s) + " transfers to itself: " + to_string(step));
          if (t.send && !computed.count({t.kind == PipelineTransfer::Kind::Activation, t.micro_batch, t.virtual_stage}))
            return fail("stage " + std::to_string(s) + " sends what it has not computed: " + to_string(step));
          const std::size_t p = pos[t.peer];
          if (p >= programs[t.peer].size() || programs[t.peer][p].kind != PipelineStep::Kind::Exchange) continue;
          const auto& theirs = programs[t.peer][p].transfers;
          for (std::size_t j = 0; j < theirs.size(); ++j) {
            const PipelineTransfer& u = theirs[j];
            if (u.send != t.send && u.peer == s && u.kind == t.kind && u.micro_batch == t.micro_batch &&
                u.virtual_stage == t.virtual_stage && !done_in_exchange[t.peer].count(j)) {
              done_in_exchange[s].insert(i);
              done_in_exchange[t.peer].insert(j);
              if (!delivered.insert(wire_of(s, t)).second) return fail("a transfer is made twice: " + to_string(step));
              break;
            }
          }
        }
        if (done_in_exchange[s].size() != step.transfers.size()) break;
        done_in_exchange[s].clear();
        ++pos[s];
        moved = true;
      }
    }
    bool finished = true;
    for (int s = 0; s < pp; ++s)
      finished = finished && pos[s] == programs[s].size();
    if (finished) break;
    if (!moved) {
      std::string where = "deadlock:";
      for (int s = 0; s < pp; ++s)
        where += " stage " + std::to_string(s) + " at " +
                 (pos[s] < programs[s].size() ? to_string(programs[s][pos[s]]) : std::string("its end")) + ";";
      return fail(where);
    }
  }
  if (computed.size() != static_cast<std::size_t>(2) * spec.micro_batches * total_v)
    return fail("only " + std::to_string(computed.size()) + " of " + std::to_string(2 * spec.micro_batches * total_v) +
                " compute steps ran");
  // The same order of sends and receives within each ordered pair of stages (in-order transports such as NCCL).
  for (int a = 0; a < pp; ++a)
    for (int b = 0; b < pp; ++b) {
      std::vector<std::tuple<int, int, int>> sends, receives;
      for (const PipelineStep& st : programs[a])
        for (const PipelineTransfer& t : st.transfers)
          if (t.send && t.peer == b) sends.emplace_back(static_cast<int>(t.kind), t.micro_batch, t.virtual_stage);
      for (const PipelineStep& st : programs[b])
        for (const PipelineTransfer& t : st.transfers)
          if (!t.send && t.peer == a) receives.emplace_back(static_cast<int>(t.kind), t.micro_batch, t.virtual_stage);
      if (sends != receives)
        return fail("stage " + std::to_string(a) + " sends to stage " + std::to_string(b) +
                    " in another order than stage " + std::to_string(b) + " receives");
    }
  result.completed = true;
  return result;
}

}  // namespace tenax
