// Every collective, dtype and edge-case size on the world communicator and on every sub-group of the layouts
// (1,1,4), (2,1,2), (2,2,1), (1,2,2), under real mpirun with 2, 3 and 4 ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "collective_check.hpp"
#include "common/mpi_test.hpp"
#include "tenax/error.hpp"
#include "tenax/layout.hpp"

namespace tenax::test {
namespace {

TEST(Collectives, WorldEveryOperationDtypeAndSize) {
  check_everything(world(), 1);
}

TEST(Collectives, SequenceCountsEveryOperation) {
  Communicator& comm = world();
  const std::uint64_t before = comm.sequence();
  const std::uint64_t global_before = operations_issued();
  int value = 1;
  comm.all_reduce(&value, &value, 1, DType::I32, ReduceOp::Sum);
  comm.barrier();
  EXPECT_EQ(comm.sequence(), before + 2);
  EXPECT_EQ(operations_issued(), global_before + 2);
  EXPECT_EQ(value, comm.size());
}

TEST(Collectives, BarrierWaitsForTheLastRank) {
  Communicator& comm = world();
  comm.barrier();
  const auto start = std::chrono::steady_clock::now();
  if (comm.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  comm.barrier();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.25) << "rank " << comm.rank() << " left the barrier before rank 0 arrived";
}

TEST(Collectives, PeerOutsideTheGroupIsAUsageError) {
  Communicator& comm = world();
  int value = 0;
  EXPECT_THROW(comm.send(&value, 1, DType::I32, comm.size()), UsageError);
  EXPECT_THROW(comm.broadcast(&value, 1, DType::I32, -1), UsageError);
  EXPECT_FALSE(comm.aborted());
}

TEST(Collectives, OverlappingReduceScatterBuffersAreRefused) {
  Communicator& comm = world();
  std::vector<float> buffer(4 * comm.size(), 1.0f);
  EXPECT_THROW(comm.reduce_scatter(buffer.data(), buffer.data() + 1, 4, DType::F32, ReduceOp::Sum), UsageError);
  EXPECT_FALSE(comm.aborted());
}

TEST(Collectives, SplitWithNegativeColorJoinsNoGroup) {
  Communicator& comm = world();
  auto odd = comm.split(comm.rank() % 2 == 1 ? 0 : -1, comm.rank(), "odd");
  if (comm.rank() % 2 == 1) {
    ASSERT_NE(odd, nullptr);
    EXPECT_EQ(odd->size(), comm.size() / 2);
    EXPECT_EQ(odd->name(), "odd");
  } else {
    EXPECT_EQ(odd, nullptr);
  }
}

class LayoutGroups : public ::testing::TestWithParam<ParallelLayout> {};

TEST_P(LayoutGroups, MembersFollowTheRankOrder) {
  const ParallelLayout layout = GetParam();
  if (layout.world_size() != world().size()) GTEST_SKIP() << "layout needs " << layout.world_size() << " ranks";
  ProcessGroups groups = ProcessGroups::create(world(), layout);
  const int me = world().rank();
  struct Axis {
    Communicator* comm;
    int RankCoords::*coord;
    int degree;
  };
  for (const Axis& axis :
       {Axis{groups.tp.get(), &RankCoords::tp, layout.tp}, Axis{groups.pp.get(), &RankCoords::pp, layout.pp},
        Axis{groups.dp.get(), &RankCoords::dp, layout.dp}}) {
    ASSERT_NE(axis.comm, nullptr);
    ASSERT_EQ(axis.comm->size(), axis.degree);
    EXPECT_EQ(axis.comm->rank(), groups.coords.*axis.coord);
    std::vector<int> members(axis.degree);
    axis.comm->all_gather(&me, members.data(), 1, DType::I32);
    for (int i = 0; i < axis.degree; ++i) {
      RankCoords expected = groups.coords;
      expected.*axis.coord = i;
      EXPECT_EQ(members[i], rank_of(layout, expected)) << "group " << axis.comm->name() << " member " << i;
    }
  }
  if (layout.tp > 1) {
    // A TP group is consecutive ranks.
    std::vector<int> members(layout.tp);
    groups.tp->all_gather(&me, members.data(), 1, DType::I32);
    for (int i = 1; i < layout.tp; ++i)
      EXPECT_EQ(members[i], members[0] + i);
  }
}

TEST_P(LayoutGroups, EveryCollectiveOnEveryGroup) {
  const ParallelLayout layout = GetParam();
  if (layout.world_size() != world().size()) GTEST_SKIP() << "layout needs " << layout.world_size() << " ranks";
  ProcessGroups groups = ProcessGroups::create(world(), layout);
  check_everything(*groups.tp, 11);
  check_everything(*groups.pp, 23);
  check_everything(*groups.dp, 37);
}

INSTANTIATE_TEST_SUITE_P(FourRanks, LayoutGroups,
                         ::testing::Values(ParallelLayout{1, 1, 4}, ParallelLayout{2, 1, 2}, ParallelLayout{2, 2, 1},
                                           ParallelLayout{1, 2, 2}),
                         [](const ::testing::TestParamInfo<ParallelLayout>& param_info) {
                           const ParallelLayout& l = param_info.param;
                           return "tp" + std::to_string(l.tp) + "pp" + std::to_string(l.pp) + "dp" +
                                  std::to_string(l.dp);
                         });

INSTANTIATE_TEST_SUITE_P(TwoAndThreeRanks, LayoutGroups,
                         ::testing::Values(ParallelLayout{2, 1, 1}, ParallelLayout{1, 2, 1}, ParallelLayout{1, 1, 3},
                                           ParallelLayout{3, 1, 1}),
                         [](const ::testing::TestParamInfo<ParallelLayout>& param_info) {
                           const ParallelLayout& l = param_info.param;
                           return "tp" + std::to_string(l.tp) + "pp" + std::to_string(l.pp) + "dp" +
                                  std::to_string(l.dp);
                         });

}  // namespace
}  // namespace tenax::test
