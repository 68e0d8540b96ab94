// run_agreed: what one rank raised, every rank raises, with that rank's message; an allocation failure is named.
#include <gtest/gtest.h>

#include <new>
#include <string>

#include "comm/agreement.hpp"
#include "common/mpi_test.hpp"
#include "core/host_memory.hpp"

namespace tenax::test {
namespace {

TEST(RunAgreed, AnAllocationFailureOnOneRankIsNamedOnEveryRank) {
  try {
    run_agreed(world(), [] {
      if (world().rank() == world().size() - 1) throw std::bad_alloc();
    });
    FAIL() << "no rank raised";
  } catch (const UsageError& e) {
    FAIL() << "an allocation failure is no usage error: " << e.what();
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()), "rank " + std::to_string(world().size() - 1) + ": " + detail::kOutOfHostMemory);
  }
}

TEST(RunAgreed, AUsageErrorOnOneRankIsAUsageErrorOnEveryRank) {
  EXPECT_THROW(run_agreed(world(),
                          [] {
                            if (world().rank() == 0) throw UsageError("bad option");
                          }),
               UsageError);
  EXPECT_NO_THROW(run_agreed(world(), [] {}));
}

}  // namespace
}  // namespace tenax::test
