// tenax::Runtime: the one object a training program creates first.
//
//   int main(int argc, char** argv) {
//     tenax::Runtime runtime(argc, argv);   // validates TENAX_*, starts MPI, sets up logging
//     tenax::Communicator& world = runtime.world();
//     ...
//   }
//
// Construction validates every TENAX_* variable (UsageError on a bad one), initialises MPI with thread support and
// creates the world communicator. Destruction finalises MPI. One per process.
#pragma once

#include <memory>

#include "tenax/communicator.hpp"

namespace tenax {

class Runtime {
 public:
  Runtime(int& argc, char**& argv);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  Communicator& world() { return *world_; }
  int rank() const { return world_->rank(); }
  int size() const { return world_->size(); }

 private:
  std::unique_ptr<Communicator> world_;
  bool finalize_mpi_ = false;
};

// Process exit codes shared by workers and tenax-launch (docs/worker-protocol.md).
enum ExitCode : int {
  kExitSuccess = 0,
  kExitCrash = 1,         // anything unexpected; retried by the launcher
  kExitUsage = 64,        // bad configuration, options or environment; never retried (EX_USAGE)
  kExitPreempted = 75,    // stopped on request after an emergency checkpoint (EX_TEMPFAIL)
  kExitPeerFailure = 76,  // a communicator failed or timed out: some other rank or node is to blame
};

// Runs body(), turning tenax exceptions into a logged message and the exit code above. For main().
int run_main(int (*body)(int, char**), int argc, char** argv);

}  // namespace tenax
