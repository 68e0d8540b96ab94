// Completion handles and the collectives' shared front end on real MPI ranks: a collective's handle is complete when
// it returns; an exchange's handle completes only once the peer took part (is_completed() says so without blocking);
// wait() with a timeout gives up on an operation a peer never joins, naming the group and the operation; bad calls are
// refused by the front end before anything is issued, the same way on every backend; a started all-reduce and the
// deferred agreement built on it return before the peers join.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm/agreement.hpp"
#include "common/mpi_test.hpp"
#include "tenax/error.hpp"

namespace tenax::test {
namespace {

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(Completion, ACollectiveIsCompleteWhenItReturns) {
  int value = world().rank() + 1, sum = 0;
  Work w = world().all_reduce(&value, &sum, 1, DType::I32, ReduceOp::Sum);
  EXPECT_TRUE(w.is_completed());
  w.wait();
  EXPECT_EQ(sum, world().size() * (world().size() + 1) / 2);
}

TEST(Completion, AnExchangeCompletesOnceThePeerTakesPart) {
  ASSERT_GE(world().size(), 2);
  std::unique_ptr<Communicator> pair = world().split(world().rank() < 2 ? 0 : -1, 0, "pair");
  float received = 0, sent = 42.0f;
  Work w;
  if (world().rank() == 0) {
    w = pair->exchange({{false, 1, &received, 1}}, DType::F32);
    // Rank 1 sends only after this barrier, so the receive cannot have completed yet.
    EXPECT_FALSE(w.is_completed());
  }
  world().barrier();
  if (world().rank() == 1) pair->exchange({{true, 0, &sent, 1}}, DType::F32).wait();
  if (world().rank() == 0) {
    w.wait();
    EXPECT_EQ(received, 42.0f);
  }
  world().barrier();
}

TEST(Completion, AStartedAllReduceReturnsBeforeThePeersJoinAndCompletesOnceTheyDid) {
  ASSERT_GE(world().size(), 2);
  std::unique_ptr<Communicator> pair = world().split(world().rank() < 2 ? 0 : -1, 0, "pair");
  std::int32_t value = world().rank() + 5, smallest = -1;
  Work w;
  if (world().rank() == 0) {
    // Rank 1 starts its part only after this barrier: a start that waited for it would never reach the barrier.
    w = pair->start_all_reduce(&value, &smallest, 1, DType::I32, ReduceOp::Min);
    EXPECT_FALSE(w.is_completed());
  }
  world().barrier();
  if (world().rank() == 1) w = pair->start_all_reduce(&value, &smallest, 1, DType::I32, ReduceOp::Min);
  if (pair) {
    w.wait();
    EXPECT_EQ(smallest, 5);
  }
  world().barrier();
}

TEST(Completion, ADeferredAgreementSaysPerFlagWhetherEveryRankSetIt) {
  Communicator& w = world();
  DeferredAgreement agreement(w);
  EXPECT_THROW(agreement.answer(), UsageError) << "nothing was posted";
  const bool last = w.rank() == w.size() - 1;
  // The last rank posts only after a barrier that every other rank reaches after posting: a post that waited for the
  // others would never get there.
  if (!last) agreement.post({true, !last, last, w.rank() % 2 == 0});
  w.barrier();
  if (last) agreement.post({true, !last, last, w.rank() % 2 == 0});
  EXPECT_TRUE(agreement.posted());
  EXPECT_THROW(agreement.post({true}), UsageError) << "the first answer was not read";
  const std::vector<bool> every = agreement.answer();
  EXPECT_FALSE(agreement.posted());
  EXPECT_EQ(every, (std::vector<bool>{true, false, w.size() == 1, w.size() == 1}));
  EXPECT_THROW(agreement.post({true, true, true, true, true, true, true, true, true}), UsageError);
  agreement.post({true, true, true, true, true, true, true, w.rank() != 0});  // kMaxFlags
  EXPECT_EQ(agreement.answer(), (std::vector<bool>{true, true, true, true, true, true, true, w.size() == 1}));
  // Posted and never read: its destructor waits for it, on every rank.
  DeferredAgreement dropped(w);
  dropped.post({w.rank() == 0});
}

TEST(Completion, WaitGivesUpOnAPeerThatNeverJoinsNamingTheGroupAndOperation) {
  ASSERT_GE(world().size(), 2);
  std::unique_ptr<Communicator> pair = world().split(world().rank() < 2 ? 0 : -1, 0, "lonely");
  if (world().rank() == 0) {
    float never = 0;
    Work w = pair->exchange({{false, 1, &never, 1}}, DType::F32);
    std::string message;
    try {
      w.wait(std::chrono::milliseconds(200));
    } catch (const TimeoutError& e) {
      message = e.what();
    }
    EXPECT_TRUE(has(message, "exchange on group 'lonely' (mpi, rank 0 of 2, operation #1, 1 x f32)")) << message;
    EXPECT_TRUE(has(message, "did not complete within 200 ms")) << message;
    EXPECT_TRUE(pair->aborted()) << "an operation given up leaves the communicator aborted";
    EXPECT_THROW(pair->exchange({{false, 1, &never, 1}}, DType::F32), CommError);
  }
  world().barrier();
}

TEST(Completion, TheFrontEndRefusesBadCallsBeforeIssuingAnything) {
  Communicator& w = world();
  const std::uint64_t before = w.sequence();
  std::vector<float> buf(8 * static_cast<std::size_t>(w.size()));
  auto refused = [&](auto call, const std::string& needle) {
    try {
      call();
      ADD_FAILURE() << "accepted; expected a UsageError mentioning " << needle;
    } catch (const UsageError& e) {
      EXPECT_TRUE(has(e.what(), needle)) << e.what();
      EXPECT_TRUE(has(e.what(), "on group 'world'")) << e.what();
    }
  };
  refused([&] { w.all_reduce(nullptr, buf.data(), 4, DType::F32, ReduceOp::Sum); }, "all_reduce");
  refused([&] { w.broadcast(buf.data(), 4, DType::F32, w.size()); }, "root rank");
  refused([&] { w.send(buf.data(), 1, DType::F32, -1); }, "peer rank -1 is outside the group");
  refused([&] { w.exchange({{true, w.size() + 3, buf.data(), 1}}, DType::F32); }, "is outside the group");
  refused([&] { w.reduce_scatter(buf.data(), buf.data(), 1, DType::F32, ReduceOp::Sum); },
          "the receive buffer overlaps the send buffer");
  if (w.size() > 1)
    refused([&] { w.all_gather(buf.data() + (w.rank() == 0 ? 1 : 0), buf.data(), 1, DType::F32); },
            "overlaps the receive buffer");
  refused([&] { w.all_reduce(buf.data(), buf.data(), ~std::size_t{0} / 2, DType::F32, ReduceOp::Sum); },
          "more bytes than memory can hold");
  refused([&] { w.start_all_reduce(buf.data(), buf.data(), 2, DType::BF16, ReduceOp::Max); },
          "bf16 is reduced through fp32: use all_reduce");
  refused([&] { w.start_all_reduce(buf.data(), buf.data(), 2, DType::F32, ReduceOp::Avg); }, "Avg is not supported");
  refused([&] { w.start_all_reduce(nullptr, buf.data(), 2, DType::I32, ReduceOp::Min); }, "a buffer is null");
  EXPECT_EQ(w.sequence(), before) << "nothing was issued";
  // In place at this rank's own block is the one overlap all_gather allows.
  std::vector<float> gathered(static_cast<std::size_t>(w.size()), 0.0f);
  gathered[static_cast<std::size_t>(w.rank())] = static_cast<float>(w.rank());
  w.all_gather(gathered.data() + w.rank(), gathered.data(), 1, DType::F32).wait();
  for (int r = 0; r < w.size(); ++r)
    EXPECT_EQ(gathered[static_cast<std::size_t>(r)], static_cast<float>(r));
}

}  // namespace
}  // namespace tenax::test
