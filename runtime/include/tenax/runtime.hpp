// tenax::Runtime: the one object a training program creates first.
//
//   int main(int argc, char** argv) {
//     tenax::Runtime runtime(argc, argv);   // validates TENAX_*, starts MPI, sets up logging
//     tenax::Communicator& world = runtime.world();
//     ...
//   }
//
// Construction validates every TENAX_* variable (UsageError on a bad one), initialises MPI (MPI_THREAD_FUNNELED: only
// the thread that uses the communicators calls MPI; a program that needs more initialises MPI itself first) and
// creates the world communicator, tenax's own split of MPI_COMM_WORLD (MPI_COMM_WORLD keeps the program's error
// handler). One per process, for the whole program: a second one while the first lives is a UsageError, and so is a
// new one after it is gone when it started MPI (MPI cannot start twice); an Engine used after the Runtime is gone is
// one too.
//
// Destruction finalises MPI, except when the Runtime is left by an exception: other ranks may then be blocked in a
// collective this rank will never join, and MPI_Finalize would wait for them. Instead the job is aborted (MPI_Abort):
// by run_main() right after it reported the exception, with the exception's exit code, or at exit for a program that
// catches the exception itself. Likewise after a communicator failed (exit code kExitPeerFailure).
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
  int uncaught_at_construction_;  // std::uncaught_exceptions() then: more at destruction means unwinding
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

// Runs body(), turning tenax exceptions into a logged message and the exit code above. For main(). When the exception
// left a Runtime (created inside body), the MPI job is aborted with that exit code after the message is logged.
int run_main(int (*body)(int, char**), int argc, char** argv);

}  // namespace tenax
