#include "tenax/runtime.hpp"

#include <mpi.h>

#include <cstdio>
#include <exception>

#include "comm/comm_state.hpp"
#include "core/check_mpi.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"

namespace tenax {

Runtime::Runtime(int& argc, char**& argv) {
  // Configuration first: a bad TENAX_* value must stop the program before it joins any collective.
  env::validate();
  log::configure();

  int initialized = 0;
  TENAX_CHECK_MPI(MPI_Initialized(&initialized));
  if (!initialized) {
    int provided = 0;
    // MULTIPLE so that helper threads (heartbeats, metrics) may make MPI calls; tenax's I/O thread never does.
    TENAX_CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    finalize_mpi_ = true;
    if (provided < MPI_THREAD_SERIALIZED)
      TENAX_LOG(Warn, "core") << "MPI provides thread level " << provided << " only; use one thread for MPI calls";
  }
  TENAX_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  world_ = make_mpi_world();
  log::set_rank(world_->rank());
  TENAX_LOG(Info, "core") << "tenax runtime up: " << world_->size() << " ranks";
}

Runtime::~Runtime() {
  const bool aborted = detail::any_communicator_aborted();
  world_.reset();
  if (!finalize_mpi_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (aborted) {
    // A collective is half done: MPI_Finalize would wait for it forever. Take the whole job down instead.
    MPI_Abort(MPI_COMM_WORLD, kExitPeerFailure);
  }
  MPI_Finalize();
}

int run_main(int (*body)(int, char**), int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const UsageError& e) {
    TENAX_LOG(Error, "core") << e.what();
    return kExitUsage;
  } catch (const CommError& e) {
    TENAX_LOG(Error, "core") << e.what();
    return kExitPeerFailure;
  } catch (const std::exception& e) {
    TENAX_LOG(Error, "core") << e.what();
    return kExitCrash;
  }
}

}  // namespace tenax
