// Partner copies under real mpirun ranks on emulated nodes (a node-local directory per node name): a lost node's
// ranks, or ranks placed on other nodes at a restart, load the copies their partner node kept; a node lost with its
// partner, or a switch lost with its nodes, falls back as the topology allows; a reader that fetches a copy marks the
// folder it makes as its job's.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "checkpoint/local_tier_cleanup.hpp"
#include "comm/agreement.hpp"
#include "common/mpi_test.hpp"
#include "common/scoped_env.hpp"
#include "test_dirs.hpp"
#include "test_model.hpp"
#include "tiered_checkpoints.hpp"

namespace tenax::test {
namespace {

namespace stdfs = std::filesystem;

// Emulated nodes on one machine: each rank's node name, and a node-local directory per node (<base>/<node>).
CheckpointOptions on_node(const std::string& dir, const std::string& base, const std::string& node) {
  CheckpointOptions o = tiered(dir, base + "/%n", layout_for(tenax::test::world().size()));
  o.node_name = node;
  return o;
}

template <class NodeOf>
void save_on_nodes(Communicator& world, const std::string& dir, const std::string& base, NodeOf node_of) {
  save_10_and_12(world, on_node(dir, base, node_of(world.rank())));
}

LoadResult load_on_node(Communicator& world, const std::string& dir, const std::string& base, const std::string& node,
                        std::uint64_t expect_seed) {
  return load_fresh_model(world, on_node(dir, base, node), expect_seed);
}

void remove_node(Communicator& world, const std::string& base, const std::string& node) {
  world.barrier();
  if (world.rank() == 0) stdfs::remove_all(base + "/" + node);
  world.barrier();
}

TEST(CheckpointPartnerCopies, ALostNodesRanksRestartFromTheCopiesItsPartnerKept) {
  Communicator& world = tenax::test::world();
  SharedTempDir dir(world, "tier1"), base(world, "nodes");
  const int half = world.size() / 2;
  auto two_nodes = [half](int rank) { return "n" + std::to_string(rank / half); };
  save_on_nodes(world, dir.path(), base.path(), two_nodes);
  // Node n1 is lost with everything on it; its ranks come back on a spare, n2, with an empty local directory.
  remove_node(world, base.path(), "n1");
  const std::string node = world.rank() < half ? "n0" : "n2";
  LoadResult r = load_on_node(world, dir.path(), base.path(), node, 12);
  EXPECT_TRUE(r.loaded && r.node_local);
  EXPECT_EQ(r.step, 12u);
  EXPECT_EQ(get_value<int>(r.blobs, "step"), 12);
  EXPECT_TRUE(r.rejected.empty()) << r.rejected.front();
  // The fetched copy is now the rank's own on its new node.
  EXPECT_EQ(r.path.rfind(base.path() + "/" + node + "/", 0), 0u) << r.path;
  EXPECT_TRUE(stdfs::exists(r.path + "/manifest.json")) << r.path;
}

// A reader that fetches its copy from the partner onto a node without the tier folder makes the folder as a writer
// does: held while it lives, and naming the job, so that the job's end removes it (a folder naming no job is left
// for ever, in /dev/shm memory lost until a reboot).
TEST(CheckpointPartnerCopies, AReaderThatFetchesACopyMarksTheFolderItMakesAsTheJobs) {
  Communicator& world = tenax::test::world();
  if (world.size() < 2) GTEST_SKIP() << "needs two nodes";
  SharedTempDir dir(world, "tier1"), base(world, "nodes");
  const ScopedEnv job("TENAX_JOB_ID", "local-00000000000000d1");
  const int half = world.size() / 2;
  save_on_nodes(world, dir.path(), base.path(), [half](int rank) { return "n" + std::to_string(rank / half); });
  remove_node(world, base.path(), "n1");
  const std::string node = world.rank() < half ? "n0" : "n2";  // n1's ranks come back on a spare
  CheckpointOptions read = on_node(dir.path(), base.path(), node);
  read.read_only = true;
  TestModel model = make_model(layout_for(world.size()), world.rank());
  std::optional<Checkpointer> reader;
  reader.emplace(world, read, model.shards);
  const LoadResult r = reader->load();
  EXPECT_TRUE(r.loaded && r.node_local);
  EXPECT_EQ(r.step, 12u);
  auto remove_spare = [&] { return ckpt::remove_job_local_copies(base.path() + "/n2", "local-00000000000000d1"); };
  const std::string folder = stdfs::path(r.path).parent_path().parent_path().string();
  if (node == "n2") {
    EXPECT_EQ(ckpt::local_tier_folder_job(folder), "local-00000000000000d1");
  }
  world.barrier();
  if (world.rank() == 0) {
    const auto report = remove_spare();
    EXPECT_EQ(report.removed, 0);
    EXPECT_EQ(report.in_use.size(), 1u);
  }
  world.barrier();
  reader.reset();
  world.barrier();
  if (world.rank() == 0) {
    const auto report = remove_spare();
    EXPECT_TRUE(report.errors.empty()) << report.errors.front();
    EXPECT_EQ(report.removed, 1);
    std::error_code ec;
    EXPECT_TRUE(stdfs::is_empty(base.path() + "/n2", ec)) << ec.message();
  }
  world.barrier();
  // The spare's folder named by another job (it uses the same key there): the fetched copy goes in, the folder is
  // neither held nor renamed, and this job's end leaves it to that job's.
  if (node == "n2" && world.rank() == half) {
    stdfs::create_directories(folder);
    std::ofstream(folder + "/job-id") << "local-00000000000000d2\n";
  }
  world.barrier();
  reader.emplace(world, read, model.shards);
  const LoadResult again = reader->load();
  EXPECT_TRUE(again.loaded && again.node_local);
  if (node == "n2") {
    EXPECT_EQ(ckpt::local_tier_folder_job(folder), "local-00000000000000d2");
    EXPECT_TRUE(stdfs::exists(again.path + "/manifest.json")) << again.path;
  }
  world.barrier();
  if (world.rank() == 0) {
    const auto report = remove_spare();
    EXPECT_EQ(report.removed, 0);
    EXPECT_EQ(report.kept, 1);
    EXPECT_TRUE(report.in_use.empty());
    const auto theirs = ckpt::remove_job_local_copies(base.path() + "/n2", "local-00000000000000d2");
    EXPECT_TRUE(theirs.errors.empty()) << theirs.errors.front();
    EXPECT_EQ(theirs.removed, 1) << "the reader holds no other job's folder";
  }
  world.barrier();
  reader.reset();
}

TEST(CheckpointPartnerCopies, RanksPlacedOnOtherNodesAtARestartFetchTheirCopies) {
  Communicator& world = tenax::test::world();
  SharedTempDir dir(world, "tier1"), base(world, "nodes");
  const int half = world.size() / 2;
  save_on_nodes(world, dir.path(), base.path(), [half](int rank) { return "n" + std::to_string(rank / half); });
  // The same two nodes, the ranks exchanged between them: every rank's copy is on the other node.
  const std::string node = "n" + std::to_string(1 - world.rank() / half);
  LoadResult r = load_on_node(world, dir.path(), base.path(), node, 12);
  EXPECT_TRUE(r.loaded && r.node_local);
  EXPECT_EQ(r.step, 12u);
  EXPECT_EQ(r.path.rfind(base.path() + "/" + node + "/", 0), 0u) << r.path;
}

// As a training loop drives it: save() and save_local() at their steps, progress() after every step, never wait().
// progress() answers each question a call later (DeferredAgreement); the copies must still be committed everywhere,
// reach the partner node, and bring a lost node's ranks back.
TEST(CheckpointPartnerCopies, ProgressAloneCommitsAndCarriesTheCopiesAsATrainingLoopDoes) {
  Communicator& world = tenax::test::world();
  SharedTempDir dir(world, "tier1"), base(world, "nodes");
  const int half = world.size() / 2;
  const std::string node = "n" + std::to_string(world.rank() / half);
  // The copies of step 12 this rank's node keeps for the other node's ranks, once the I/O thread stored them.
  auto partner_copies_here = [&] {
    int n = 0;
    std::error_code ec;
    for (const auto& job : stdfs::directory_iterator(base.path() + "/" + node, ec))
      for (const auto& from : stdfs::directory_iterator(job.path() / "partner", ec))
        n += stdfs::exists(from.path() / "step_12" / "manifest.json") ? 1 : 0;
    return n;
  };
  {
    TestModel model = make_model(layout_for(world.size()), world.rank());
    Checkpointer ckpt(world, on_node(dir.path(), base.path(), node), model.shards);
    fill(model, 10);
    ckpt.save(10, step_blob(10));
    while (!ckpt.progress()) {
    }
    EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(10));
    fill(model, 12);
    ckpt.save_local(12, step_blob(12));
    fill(model, 13);  // training goes on: the copy holds what was staged
    // A rank that reaches progress() first is not held there until the others arrive: rank 0 returns from its call
    // before the others make theirs (they wait at the barrier for it; a progress() that waited would never return).
    if (world.rank() == 0) ckpt.progress();
    world.barrier();
    if (world.rank() != 0) ckpt.progress();
    // Then one call per step until every partner copy is stored (by the I/O thread). The bound only turns a broken
    // exchange into a failure naming it instead of a hang.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    bool overdue = false;
    while (!every_rank(world, partner_copies_here() == half) && !overdue) {
      ckpt.progress();
      overdue = any_rank(world, std::chrono::steady_clock::now() > give_up);
    }
    ASSERT_FALSE(overdue) << "after 120 s of progress() calls, " << partner_copies_here() << " of the " << half
                          << " partner copies of step 12 are on node " << node;
    EXPECT_EQ(ckpt.last_local_step(), std::optional<std::uint64_t>(12));
  }
  world.barrier();
  remove_node(world, base.path(), "n1");
  LoadResult r = load_on_node(world, dir.path(), base.path(), world.rank() < half ? "n0" : "n2", 12);
  EXPECT_TRUE(r.loaded && r.node_local);
  EXPECT_EQ(r.step, 12u);
  EXPECT_EQ(get_value<int>(r.blobs, "step"), 12);
}

TEST(CheckpointPartnerCopies, ANodeLostWithItsPartnerFallsBackToTheSharedTier) {
  Communicator& world = tenax::test::world();
  if (world.size() != 4) GTEST_SKIP() << "needs four nodes of one rank: n0 -> n1 -> n2 -> n3 -> n0";
  SharedTempDir dir(world, "tier1"), base(world, "nodes");
  auto own_node = [](int rank) { return "n" + std::to_string(rank); };
  save_on_nodes(world, dir.path(), base.path(), own_node);
  remove_node(world, base.path(), "n1");  // rank 1's own copies
  remove_node(world, base.path(), "n2");  // and the node keeping them as partner (rank 2's own with it)
  const std::string node = world.rank() == 1 ? "n5" : world.rank() == 2 ? "n6" : own_node(world.rank());
  LoadResult r = load_on_node(world, dir.path(), base.path(), node, 10);
  EXPECT_TRUE(r.loaded);
  EXPECT_FALSE(r.node_local);
  EXPECT_EQ(r.step, 10u);
}

TEST(CheckpointPartnerCopies, OneLostNodeOfFourIsRecoveredFromItsPartner) {
  Communicator& world = tenax::test::world();
  if (world.size() != 4) GTEST_SKIP() << "needs four nodes of one rank";
  SharedTempDir dir(world, "tier1"), base(world, "nodes");
  auto own_node = [](int rank) { return "n" + std::to_string(rank); };
  save_on_nodes(world, dir.path(), base.path(), own_node);
  remove_node(world, base.path(), "n2");
  const std::string node = world.rank() == 2 ? "n7" : own_node(world.rank());
  LoadResult r = load_on_node(world, dir.path(), base.path(), node, 12);
  EXPECT_TRUE(r.loaded && r.node_local);
  EXPECT_EQ(r.step, 12u);
}

// A lost leaf switch takes its nodes' own copies with it. With the switches known, every node's partner is under the
// other switch and every rank restarts from the node-local tier; without them, the next node (under the same switch)
// was the partner and the step falls back to the shared tier.
TEST(CheckpointPartnerCopies, ALostSwitchIsRecoveredFromPartnersUnderTheOtherSwitch) {
  Communicator& world = tenax::test::world();
  if (world.size() != 4) GTEST_SKIP() << "needs four nodes of one rank, two under each switch";
  const std::string node = "n" + std::to_string(world.rank());
  const std::string replacement = world.rank() < 2 ? "n" + std::to_string(world.rank() + 4) : node;
  for (const bool switches_known : {true, false}) {
    SharedTempDir dir(world, "tier1"), base(world, "nodes");
    CheckpointOptions saving = on_node(dir.path(), base.path(), node);
    if (switches_known) saving.failure_domain = world.rank() < 2 ? "s1" : "s2";
    save_10_and_12(world, saving);
    remove_node(world, base.path(), "n0");  // switch s1 with both its nodes
    remove_node(world, base.path(), "n1");
    CheckpointOptions loading = on_node(dir.path(), base.path(), replacement);
    if (switches_known) loading.failure_domain = world.rank() < 2 ? "s1" : "s2";
    LoadResult r = load_fresh_model(world, loading, switches_known ? 12 : 10);
    EXPECT_TRUE(r.loaded);
    EXPECT_EQ(r.node_local, switches_known) << "switches known: " << switches_known;
    EXPECT_EQ(r.step, switches_known ? 12u : 10u);
  }
}

}  // namespace
}  // namespace tenax::test
