#include "tenax/runtime.hpp"

#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>

#include "comm/comm_state.hpp"
#include "core/check_mpi.hpp"
#include "core/host_memory.hpp"
#include "process/mpi_alive.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"

namespace tenax {
namespace {

// The thread level tenax needs: MPI_THREAD_FUNNELED. Every MPI call tenax makes comes from the thread that uses the
// communicators (in practice the one that created the Runtime), and none of tenax's own threads calls MPI:
//   - the communicator watchdog (comm/mpi/watchdog.cpp) reads atomics, logs and _exit()s;
//   - the heartbeat thread (worker/worker.cpp) reads tenax::operations_issued(), an atomic, and writes files;
//   - the checkpoint I/O thread (checkpoint/io_thread.hpp) makes HDF5 calls only (serial HDF5, no MPI-IO);
//   - the data loader's workers (metrics/data_loader.cpp) run the program's producer and copy batches;
//   - step metrics gather on the training thread, inside StepMetrics calls.
// Asking for MULTIPLE would only make MPI take locks on every call for nothing. A program that calls MPI from other
// threads itself initialises MPI with the level it needs before creating the Runtime.
constexpr int kThreadLevel = MPI_THREAD_FUNNELED;

// Set when a Runtime that initialised MPI was left by an exception: MPI must then end with MPI_Abort, never with
// MPI_Finalize, which would wait for ranks that may be blocked in a collective this rank will never join.
std::atomic<bool> g_abort_pending{false};

// Runtimes alive in this process: one at a time (MPI starts once and, once finalised, never again). `g_runtime_ended`:
// one has gone, and its world communicator with it (also where the program owns MPI and it is not finalised).
std::atomic<int> g_runtimes{0};
std::atomic<bool> g_runtime_ended{false};

[[noreturn]] void abort_job(int code) {
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this is for an MPI that does
}

bool abort_is_pending() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return g_abort_pending.load() && !finalized;
}

// At exit, for programs that catch the exception outside the Runtime's scope and return from main: the job ends with
// the program's exit status (kExitCrash for 0: a rank that left its peers inside a collective did not succeed).
void abort_at_exit(int status, void* /*unused*/) {
  if (!abort_is_pending()) return;
  const int code = status != 0 ? status : kExitCrash;
  TENAX_LOG(Error, "core")
      << "the program is exiting after an exception left tenax::Runtime: aborting the MPI job (exit " << code
      << ") so that no other rank waits for this one";
  abort_job(code);
}

bool register_abort_at_exit() {
#if defined(__GLIBC__)
  return on_exit(abort_at_exit, nullptr) == 0;  // glibc's atexit that is given the exit status
#else
  return std::atexit([] { abort_at_exit(kExitCrash, nullptr); }) == 0;
#endif
}

// run_main's handlers: the exception has been reported; end the job with its exit code if a Runtime was left by it.
int finish_after(int code) {
  if (abort_is_pending()) abort_job(code);
  return code;
}

}  // namespace

Runtime::Runtime(int& argc, char**& argv) : uncaught_at_construction_(std::uncaught_exceptions()) {
  // Configuration first: a bad TENAX_* value must stop the program before it joins any collective.
  env::validate();
  log::configure();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    throw UsageError(
        "tenax::Runtime: MPI was already finalised in this process (by an earlier Runtime, or by the program), and "
        "MPI cannot be started twice: create one Runtime for the whole program");
  if (g_runtimes.fetch_add(1) != 0) {
    g_runtimes.fetch_sub(1);
    throw UsageError(
        "tenax::Runtime: one already exists in this process; create one Runtime for the whole program and pass its "
        "world() where a communicator is needed");
  }

  try {
    int initialized = 0;
    TENAX_CHECK_MPI(MPI_Initialized(&initialized));
    int provided = 0;
    if (!initialized) {
      TENAX_CHECK_MPI(MPI_Init_thread(&argc, &argv, kThreadLevel, &provided));
      finalize_mpi_ = true;
    } else {
      TENAX_CHECK_MPI(MPI_Query_thread(&provided));
    }
    if (provided < kThreadLevel)
      TENAX_LOG(Warn, "core") << "MPI provides thread level " << provided << " only (tenax needs MPI_THREAD_FUNNELED, "
                              << kThreadLevel << "): tenax's helper threads make no MPI calls, but MPI may not expect "
                              << "them to exist";
    // No error handler is set on MPI_COMM_WORLD: it belongs to the program. tenax's own communicators (duplicates and
    // splits of it) return errors instead of aborting, so that tenax can name the failed operation.
    world_ = make_mpi_world();
    log::set_rank(world_->rank());
    TENAX_LOG(Info, "core") << "tenax runtime up: " << world_->size() << " ranks, MPI thread level " << provided;
  } catch (...) {
    g_runtimes.fetch_sub(1);  // no Runtime after all: the destructor will not run
    throw;
  }
}

Runtime::~Runtime() {
  g_runtimes.fetch_sub(1);
  g_runtime_ended.store(true);
  const bool unwinding = std::uncaught_exceptions() > uncaught_at_construction_;
  const bool aborted = detail::any_communicator_aborted();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (unwinding && !finalized) {
    // An exception is leaving the scope of the Runtime on this rank. The other ranks may be blocked in a collective
    // this rank will never join, and MPI_Finalize would wait for them (until TENAX_COMM_TIMEOUT at best). The
    // exception is not visible from here: tenax::run_main reports it and then aborts the job with its exit code; a
    // program that catches it itself gets the job aborted when it exits. The communicator is not freed (MPI_Comm_free
    // is collective).
    [[maybe_unused]] Communicator* leaked = world_.release();
    if (finalize_mpi_) {
      g_abort_pending.store(true);
      static const bool registered = register_abort_at_exit();
      TENAX_LOG(Error, "core") << "an exception is leaving tenax::Runtime on this rank: the MPI job will be aborted "
                               << "once it is reported (other ranks may be waiting for this one in a collective)"
                               << (registered ? "" : "; registering the abort at exit failed");
    } else {
      TENAX_LOG(Warn, "core") << "an exception is leaving tenax::Runtime on this rank; the program initialised MPI "
                              << "and must end the job itself (MPI_Abort): MPI_Finalize would wait for ranks blocked "
                              << "in a collective this rank will never join";
    }
    return;
  }
  world_.reset();
  if (!finalize_mpi_ || finalized) return;
  if (aborted) {
    // A collective is half done: MPI_Finalize would wait for it forever. Take the whole job down instead.
    TENAX_LOG(Error, "core") << "a communicator failed on this rank: aborting the MPI job (exit " << kExitPeerFailure
                             << ")";
    abort_job(kExitPeerFailure);
  }
  MPI_Finalize();
}

void detail::refuse_after_finalize(const char* what) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || (g_runtime_ended.load() && g_runtimes.load() == 0))
    throw UsageError(std::string(what) +
                     ": the tenax::Runtime is gone (and with it its world communicator and, unless the program started "
                     "MPI itself, MPI); keep the Runtime alive until every "
                     "Engine and Checkpointer made on its world() is done with (create it first in main, or in "
                     "tenax::run_main's body before them)");
}

int run_main(int (*body)(int, char**), int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const UsageError& e) {
    TENAX_LOG(Error, "core") << e.what();
    return finish_after(kExitUsage);
  } catch (const CommError& e) {
    TENAX_LOG(Error, "core") << e.what();
    return finish_after(kExitPeerFailure);
  } catch (const std::bad_alloc&) {
    // Memory outside the engine's accounting (core/host_memory.hpp) ran out: name it rather than "std::bad_alloc".
    TENAX_LOG(Error, "core") << detail::kOutOfHostMemory;
    return finish_after(kExitCrash);
  } catch (const std::exception& e) {
    TENAX_LOG(Error, "core") << e.what();
    return finish_after(kExitCrash);
  } catch (...) {
    // Something that is no std::exception (`throw 42` in a callback): reported as such instead of std::terminate.
    TENAX_LOG(Error, "core") << "an exception that is not a std::exception left the program (throw only types "
                             << "derived from std::exception, so that their message can be shown)";
    return finish_after(kExitCrash);
  }
}

}  // namespace tenax
