// One rank leaves tenax::Runtime by an exception while the other waits in a collective it will never complete. The job
// must end at once with the exception named and a non-zero exit: MPI_Finalize on the failing rank would wait for the
// waiting rank forever (until TENAX_COMM_TIMEOUT, which the test sets far above its own limit).
//
//   exception_probe run-main        rank 1 throws std::runtime_error inside tenax::run_main (exit 1)
//   exception_probe usage-error     rank 1 throws UsageError inside tenax::run_main (exit 64: never retried)
//   exception_probe caught-outside  rank 1 throws; main catches it outside the Runtime's scope and returns 3
//   exception_probe not-an-exception  rank 1 throws an int inside tenax::run_main (exit 1, not std::terminate)
// "FAILED" in the output means the waiting rank's collective returned, which it never may.
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "tenax/error.hpp"
#include "tenax/runtime.hpp"

namespace {

const char* g_mode = "";

void wait_in_a_collective_or_throw(tenax::Runtime& runtime) {
  tenax::Communicator& world = runtime.world();
  if (world.rank() == 1) {
    if (std::strcmp(g_mode, "usage-error") == 0)
      throw tenax::UsageError("injected usage error on rank 1 (exception_probe)");
    if (std::strcmp(g_mode, "not-an-exception") == 0) throw 42;
    throw std::runtime_error("injected failure on rank 1 (exception_probe)");
  }
  float value = 1.0f;
  world.all_reduce(&value, &value, 1, tenax::DType::F32, tenax::ReduceOp::Sum);
  std::printf("FAILED: all_reduce returned on rank %d although rank 1 never joined\n", world.rank());
}

int body(int argc, char** argv) {
  tenax::Runtime runtime(argc, argv);
  wait_in_a_collective_or_throw(runtime);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  g_mode = argc > 1 ? argv[1] : "";
  if (std::strcmp(g_mode, "caught-outside") == 0) {
    try {
      tenax::Runtime runtime(argc, argv);
      wait_in_a_collective_or_throw(runtime);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "caught outside the runtime: %s\n", error.what());
      return 3;
    }
    return 0;
  }
  if (std::strcmp(g_mode, "run-main") != 0 && std::strcmp(g_mode, "usage-error") != 0 &&
      std::strcmp(g_mode, "not-an-exception") != 0) {
    std::fprintf(stderr, "usage: exception_probe run-main|usage-error|caught-outside|not-an-exception\n");
    return 2;
  }
  return tenax::run_main(body, argc, argv);
}
