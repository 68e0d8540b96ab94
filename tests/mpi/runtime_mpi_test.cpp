// What tenax::Runtime asks of MPI and leaves to the program: the thread level it needs, and error handlers on its own
// communicators only.
#include <gtest/gtest.h>
#include <mpi.h>

#include "comm/mpi/mpi_communicator.hpp"
#include "common/mpi_test.hpp"

namespace tenax::test {
namespace {

MPI_Errhandler errhandler_of(MPI_Comm comm) {
  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  EXPECT_EQ(MPI_Comm_get_errhandler(comm, &handler), MPI_SUCCESS);
  return handler;
}

TEST(RuntimeMpi, AsksForTheFunneledThreadLevelOnly) {
  // No thread of tenax but the one using the communicators calls MPI (runtime.cpp lists them): MULTIPLE would only
  // make every MPI call pay for locks.
  int provided = -1;
  ASSERT_EQ(MPI_Query_thread(&provided), MPI_SUCCESS);
  EXPECT_EQ(provided, MPI_THREAD_FUNNELED);
}

TEST(RuntimeMpi, ErrorsReturnOnTenaxCommunicatorsOnlyNotOnMpiCommWorld) {
  MPI_Errhandler world_handler = errhandler_of(MPI_COMM_WORLD);
  EXPECT_TRUE(world_handler == MPI_ERRORS_ARE_FATAL) << "MPI_COMM_WORLD's error handler belongs to the program";
  MPI_Errhandler_free(&world_handler);

  auto* tenax_world = dynamic_cast<detail::MpiCommunicator*>(&world());
  ASSERT_NE(tenax_world, nullptr);
  EXPECT_NE(tenax_world->handle(), MPI_COMM_WORLD);
  MPI_Errhandler own = errhandler_of(tenax_world->handle());
  EXPECT_TRUE(own == MPI_ERRORS_RETURN);
  MPI_Errhandler_free(&own);

  auto group = world().split(0, world().rank(), "errhandler-check");
  auto* split = dynamic_cast<detail::MpiCommunicator*>(group.get());
  ASSERT_NE(split, nullptr);
  MPI_Errhandler split_handler = errhandler_of(split->handle());
  EXPECT_TRUE(split_handler == MPI_ERRORS_RETURN);
  MPI_Errhandler_free(&split_handler);
}

}  // namespace
}  // namespace tenax::test
