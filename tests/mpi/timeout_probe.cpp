// A collective that one rank never joins must fail on the others within TENAX_COMM_TIMEOUT, with an error naming
// the group and the operation, and leave the communicator aborted. Rank 1 stays out; rank 0 checks the error.
// The test passes when rank 0 prints the success line (ctest matches it); the job then ends with MPI_Abort because a
// collective is left half done, which is exactly what a real worker does after such a failure.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "tenax/error.hpp"
#include "tenax/runtime.hpp"

int main(int argc, char** argv) {
  tenax::Runtime runtime(argc, argv);
  tenax::Communicator& world = runtime.world();
  auto group = world.split(0, world.rank(), "probe");
  if (world.rank() == 1) {
    // Stay alive past the others' timeout without joining the collective.
    std::this_thread::sleep_for(std::chrono::seconds(6));
    return 0;
  }
  float value = 1.0f;
  const auto start = std::chrono::steady_clock::now();
  try {
    group->all_reduce(&value, &value, 1, tenax::DType::F32, tenax::ReduceOp::Sum);
    std::printf("FAILED: all_reduce completed although rank 1 never joined\n");
    return 1;
  } catch (const tenax::TimeoutError& e) {
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string message = e.what();
    const bool names_everything = message.find("all_reduce") != std::string::npos &&
                                  message.find("'probe'") != std::string::npos &&
                                  message.find("TENAX_COMM_TIMEOUT") != std::string::npos;
    if (!names_everything) {
      std::printf("FAILED: timeout message lacks the operation, group or variable: %s\n", message.c_str());
      return 1;
    }
    if (waited < 0.9 || waited > 4.0) {
      std::printf("FAILED: timed out after %.2f s with TENAX_COMM_TIMEOUT=1s\n", waited);
      return 1;
    }
    std::printf("rank %d: %s\n", world.rank(), message.c_str());
  }
  if (!group->aborted()) {
    std::printf("FAILED: communicator not marked aborted after a timeout\n");
    return 1;
  }
  try {
    group->barrier();
    std::printf("FAILED: an aborted communicator accepted another operation\n");
    return 1;
  } catch (const tenax::CommError& e) {
    std::printf("rank %d: later operation refused: %s\n", world.rank(), e.what());
  }
  std::printf("comm timeout probe passed on rank %d\n", world.rank());
  std::fflush(stdout);
  return 0;
}
