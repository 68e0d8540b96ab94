// Internal: refusing work once MPI is finalised, so that a collective of an Engine (or another object holding a
// reference to the world communicator) outliving its tenax::Runtime is a UsageError naming the mistake instead of
// MPI's abort (or a call through a destroyed communicator).
#pragma once

namespace tenax::detail {

// Throws UsageError naming `what` ("Engine::step()") when MPI has been finalised in this process, or when the
// process's Runtime (whose world communicator the caller may hold a reference to) is gone and no other lives.
void refuse_after_finalize(const char* what);

}  // namespace tenax::detail
