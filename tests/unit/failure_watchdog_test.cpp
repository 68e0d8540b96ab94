// The process-wide failure watchdog of asynchronous communicators, driven with fake communicators and an injected
// clock: the first asynchronous error or an operation older than the timeout, on any communicator, aborts every one of
// them (the sibling a failed rank would otherwise leave spinning included), exactly once, and is remembered for the
// host waits that consult it; healthy communicators are left alone.
#include <gtest/gtest.h>

#include <string>

#include "core/failure_watchdog.hpp"

namespace tenax::detail {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class FakeCommunicator : public Watched {
 public:
  explicit FakeCommunicator(std::string name) : name_(std::move(name)) {}
  std::string watched_name() const override { return "group '" + name_ + "'"; }
  std::string async_error() override { return error; }
  std::optional<Clock::time_point> oldest_pending() override { return pending_since; }
  void abort() override { ++aborts; }

  std::string error;
  std::optional<Clock::time_point> pending_since;
  int aborts = 0;

 private:
  std::string name_;
};

TEST(FailureWatchdog, HealthyCommunicatorsAreLeftAlone) {
  FailureWatchdog dog(1000ms);
  FakeCommunicator tp("tp"), dp("dp");
  dog.add(&tp);
  dog.add(&dp);
  const Clock::time_point t0 = Clock::now();
  tp.pending_since = t0;  // a collective in flight for less than the timeout
  EXPECT_FALSE(dog.poll_once(t0 + 999ms));
  EXPECT_EQ(tp.aborts + dp.aborts, 0);
  EXPECT_FALSE(dog.failure());
}

TEST(FailureWatchdog, AnAsyncErrorOnOneAbortsEveryCommunicator) {
  FailureWatchdog dog(1000ms);
  FakeCommunicator tp("tp[0,1]"), dp("dp[1,0]"), pp("pp[1,0]");
  for (FakeCommunicator* c : {&tp, &dp, &pp})
    dog.add(c);
  dp.error = "remote process exited or there was a network error";
  const std::optional<std::string> found = dog.poll_once(Clock::now());
  ASSERT_TRUE(found);
  EXPECT_NE(found->find("group 'dp[1,0]' reported an asynchronous error: remote process exited"), std::string::npos)
      << *found;
  EXPECT_EQ(tp.aborts, 1) << "the sibling communicator must be aborted too";
  EXPECT_EQ(dp.aborts, 1);
  EXPECT_EQ(pp.aborts, 1);
  ASSERT_TRUE(dog.failure());
  EXPECT_EQ(*dog.failure(), *found) << "host waits see the first failure";
}

TEST(FailureWatchdog, AnOperationOlderThanTheTimeoutAbortsEveryCommunicator) {
  FailureWatchdog dog(1000ms);
  FakeCommunicator tp("tp"), dp("dp");
  dog.add(&tp);
  dog.add(&dp);
  const Clock::time_point t0 = Clock::now();
  dp.pending_since = t0;
  const std::optional<std::string> found = dog.poll_once(t0 + 1500ms);
  ASSERT_TRUE(found);
  EXPECT_NE(found->find("group 'dp' has an operation unfinished after 1500 ms"), std::string::npos) << *found;
  EXPECT_EQ(tp.aborts, 1);
  EXPECT_EQ(dp.aborts, 1);
}

TEST(FailureWatchdog, TheFirstFailureIsKeptAndARemovedCommunicatorIsNotTouched) {
  FailureWatchdog dog(0ms);  // 0: no timeout, errors only
  FakeCommunicator a("a"), b("b");
  dog.add(&a);
  dog.add(&b);
  dog.remove(&b);
  a.pending_since = Clock::now() - 10h;
  EXPECT_FALSE(dog.poll_once(Clock::now())) << "no timeout when TENAX_COMM_TIMEOUT is 0";
  dog.abort_all("a host wait gave up");
  a.error = "a later error";
  dog.poll_once(Clock::now());
  EXPECT_EQ(*dog.failure(), "a host wait gave up");
  EXPECT_EQ(b.aborts, 0);
}

}  // namespace
}  // namespace tenax::detail
