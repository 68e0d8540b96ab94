// The node-local rank that chooses each rank's GPU: MPI's shared-memory split (all ranks of this test share one
// host), and the plugin's slot (TENAX_LOCAL_RANK) when it belongs to this world and fits the node.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "comm/node_local.hpp"
#include "common/mpi_test.hpp"

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

}  // namespace
}  // namespace tenax::test
