// A collective that one rank never joins must end the others within TENAX_COMM_TIMEOUT with an error naming the
// group, the operation and how long it waited, and exit code 76 (kExitPeerFailure). Rank 1 stays out; ranks 0 and 2
// block in the all-reduce until the watchdog ends them. ctest checks the message; "FAILED" means the call returned.
#include <chrono>
#include <cstdio>
#include <thread>

#include "tenax/runtime.hpp"

int main(int argc, char** argv) {
  tenax::Runtime runtime(argc, argv);
  tenax::Communicator& world = runtime.world();
  auto group = world.split(0, world.rank(), "probe");
  if (world.rank() == 1) {
    // Stay alive past the others' timeout without joining the collective.
    std::this_thread::sleep_for(std::chrono::seconds(8));
    return 0;
  }
  float value = 1.0f;
  group->all_reduce(&value, &value, 1, tenax::DType::F32, tenax::ReduceOp::Sum);
  std::printf("FAILED: all_reduce returned on rank %d although rank 1 never joined\n", world.rank());
  return 1;
}
