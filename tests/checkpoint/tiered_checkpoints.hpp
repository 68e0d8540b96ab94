// What the node-local and partner tier tests share: checkpoint options with a node-local tier, the layout for the
// world size, and steps 10 (both tiers) and 12 (node-local only) saved and loaded back into a fresh model.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "tenax/checkpoint.hpp"
#include "tenax/communicator.hpp"
#include "test_model.hpp"

namespace tenax::test {

inline CheckpointOptions tiered(const std::string& dir, const std::string& local_dir, const ParallelLayout& layout) {
  CheckpointOptions o;
  o.dir = dir;
  o.local_dir = local_dir;
  o.layout = layout;
  return o;
}

inline ParallelLayout layout_for(int world) {
  return world == 4 ? ParallelLayout{2, 1, 2} : ParallelLayout{1, 1, world};  // replicas on every rank either way
}

inline Blobs step_blob(int step) {
  Blobs b;
  put_value(b, "step", step);
  return b;
}

// Saves step 10 to both tiers and step 12 to the node-local tier only, each with its own values; returns once every
// rank's copy (and, across nodes, every partner copy) is kept.
inline void save_10_and_12(Communicator& world, const CheckpointOptions& options) {
  TestModel model = make_model(layout_for(world.size()), world.rank());
  {
    Checkpointer ckpt(world, options, model.shards);
    fill(model, 10);
    ckpt.save(10, step_blob(10));
    ckpt.wait();
    fill(model, 12);
    ckpt.save_local(12, step_blob(12));
    ckpt.wait();
    EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(10));
    EXPECT_EQ(ckpt.last_local_step(), std::optional<std::uint64_t>(12));
    EXPECT_EQ(ckpt.commit_counts().shared, 1u) << "step 10";
    EXPECT_EQ(ckpt.commit_counts().node_local, 2u) << "steps 10 and 12";
  }  // the I/O thread has stored what partners sent
  world.barrier();
}
inline void save_10_and_12(Communicator& world, const std::string& dir, const std::string& local_dir) {
  save_10_and_12(world, tiered(dir, local_dir, layout_for(world.size())));
}

inline LoadResult load_fresh_model(Communicator& world, const CheckpointOptions& options, std::uint64_t expect_seed) {
  TestModel model = make_model(layout_for(world.size()), world.rank());
  scramble(model);
  Checkpointer ckpt(world, options, model.shards);
  LoadResult r = ckpt.load();
  std::string first;
  EXPECT_EQ(mismatches(model, expect_seed, &first), 0u) << "first wrong " << first;
  return r;
}
inline LoadResult load_fresh_model(Communicator& world, const std::string& dir, const std::string& local_dir,
                                   std::uint64_t expect_seed) {
  return load_fresh_model(world, tiered(dir, local_dir, layout_for(world.size())), expect_seed);
}

}  // namespace tenax::test
