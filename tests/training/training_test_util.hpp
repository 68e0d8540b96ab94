// Shared setup of the training tests: a small model that trains in well under a second per layout, and a single-rank
// reference run on world rank 0 whose losses every rank receives.
#pragma once

#include <memory>
#include <vector>

#include "common/mpi_test.hpp"
#include "trainer.hpp"

namespace tenax::test {

inline examples::TrainConfig small_config(int tp, int pp, int dp) {
  examples::TrainConfig c;
  c.tp = tp;
  c.pp = pp;
  c.dp = dp;
  c.model.vocab = 64;
  c.model.hidden = 32;
  c.model.layers = 4;
  c.model.seq_len = 8;
  c.batch = 8;
  c.micro_batch = 2;
  c.seed = 7;
  c.optimizer.adamw.lr = 3e-3f;
  c.optimizer.adamw.weight_decay = 0.0f;
  c.data_parallel.bucket_bytes = 4096;  // several buckets even in this small model
  return c;
}

struct RunResult {
  std::vector<double> losses;
  std::vector<bool> skipped;
  std::vector<float> scales;
  std::uint64_t checksum = 0;
};

inline RunResult train(Communicator& comm, const examples::TrainConfig& config, int steps) {
  examples::Trainer trainer(comm, config);
  RunResult r;
  for (int s = 0; s < steps; ++s) {
    const examples::StepResult step = trainer.step();
    r.losses.push_back(step.loss);
    r.skipped.push_back(step.skipped);
    r.scales.push_back(step.loss_scale);
  }
  r.checksum = trainer.parameters_checksum();
  return r;
}

// The (1,1,1) run of `config` on world rank 0 alone; its losses and checksum are broadcast to every rank.
inline RunResult single_rank_reference(examples::TrainConfig config, int steps) {
  config.tp = config.pp = config.dp = 1;
  Communicator& w = world();
  std::unique_ptr<Communicator> self = w.split(w.rank() == 0 ? 0 : -1, 0, "reference");
  RunResult r;
  if (self) r = train(*self, config, steps);
  r.losses.resize(static_cast<std::size_t>(steps));
  w.broadcast(r.losses.data(), r.losses.size(), DType::F64, 0);
  w.broadcast(&r.checksum, 1, DType::I64, 0);
  return r;
}

}  // namespace tenax::test
