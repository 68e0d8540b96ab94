// The node-local rank that chooses each rank's GPU: MPI's shared-memory split (all ranks of this test share one
// host), and the plugin's slot (TENAX_LOCAL_RANK) when it belongs to this world and fits the node.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "comm/node_local.hpp"
#include "comm/node_shared_words.hpp"
#include "common/mpi_test.hpp"
#include "core/host_memory.hpp"
#include "tenax/error.hpp"
#include "tenax/tensor.hpp"

namespace tenax::test {
namespace {

struct ScopedEnv {
  ScopedEnv(const char* name, const std::string& value) : name_(name) { ::setenv(name, value.c_str(), 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  const char* name_;
};

TEST(NodeLocalRank, EveryRankOfOneHostIsOnOneNodeInRankOrder) {
  const detail::LocalRank local = detail::node_local_rank(world());
  EXPECT_EQ(local.size, world().size());
  EXPECT_EQ(local.rank, world().rank());
  EXPECT_EQ(local.nodes, 1);
}

TEST(NodeLocalRank, ThePluginsSlotWinsWhenItBelongsToThisWorld) {
  const int n = world().size();
  {
    ScopedEnv slot("TENAX_LOCAL_RANK", std::to_string(n - 1 - world().rank()));
    ScopedEnv size("TENAX_WORLD_SIZE", std::to_string(n));
    EXPECT_EQ(detail::node_local_rank(world()).rank, n - 1 - world().rank());
  }
  {
    // Inherited from an enclosing step of another size: not this world's.
    ScopedEnv slot("TENAX_LOCAL_RANK", std::to_string(n - 1 - world().rank()));
    ScopedEnv size("TENAX_WORLD_SIZE", std::to_string(2 * n));
    EXPECT_EQ(detail::node_local_rank(world()).rank, world().rank());
  }
  {
    // A slot past the node's ranks would pick a GPU that another rank's slot might also map to: ignored.
    ScopedEnv slot("TENAX_LOCAL_RANK", std::to_string(n + world().rank()));
    ScopedEnv size("TENAX_WORLD_SIZE", std::to_string(n));
    EXPECT_EQ(detail::node_local_rank(world()).rank, world().rank());
  }
}

// The engine's node budget (TENAX_MEMORY_LIMIT=auto): the ranks of a node count their host memory in one shared word,
// so one rank may take far more than an even share (a pipeline's first stage, with the embedding) while the node's
// total fits; the charge that takes the node's total over is refused, on whichever rank asks for it.
TEST(NodeSharedWords, TheNodesRanksShareOneHostMemoryBudget) {
  detail::NodeSharedWords words(world());
  ASSERT_EQ(words.node_ranks(), world().size());
  const std::uint64_t budget = 1 << 20;
  const auto total = [&] { return std::atomic_ref<std::uint64_t>(*words.word(0)).load(); };
  {
    const detail::HostMemoryLimit limit(budget, nullptr, words.word(0));
    // Rank 0 takes 700 KiB, more than the quarter of the budget an even split would give it; each other rank 50 KiB.
    const std::int64_t floats = world().rank() == 0 ? 700 * 256 : 50 * 256;
    const Tensor mine = Tensor::zeros({floats}, DType::F32);
    world().barrier();
    const std::uint64_t taken = (700 + 50 * (world().size() - 1)) * 1024;
    EXPECT_EQ(total(), taken);
    world().barrier();
    // 200 KiB more on the last rank would take the node over its 1 MiB: refused there, and nothing is counted.
    if (world().rank() == world().size() - 1) {
      EXPECT_THROW(Tensor::zeros({200 * 256}, DType::F32), UsageError);
      EXPECT_EQ(total(), taken);
      const Tensor fits = Tensor::zeros({10 * 256}, DType::F32);  // 10 KiB still fit
      EXPECT_EQ(total(), taken + 10 * 1024);
    }
    world().barrier();
    EXPECT_EQ(total(), taken);  // the 10 KiB went again
    world().barrier();
  }
  // Each rank's tensor went before its limit: the node's total is back at 0.
  world().barrier();
  EXPECT_EQ(total(), 0u);
  words.release();
}

}  // namespace
}  // namespace tenax::test
