// Internal state shared by the communicator backends.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "tenax/communicator.hpp"

namespace tenax::detail {

// Counts one issued operation (process-wide; see tenax::operations_issued()).
void count_operation();

// Records that some communicator was aborted: the runtime must then not wait in MPI_Finalize for peers that may
// never arrive.
void mark_communicator_aborted();
bool any_communicator_aborted();

// The wait limit from TENAX_COMM_TIMEOUT (zero: wait forever).
std::chrono::milliseconds comm_timeout();

// "all_reduce on group 'tp[0,1]' (rank 1 of 2, operation #17, 1024 x f32)"
std::string describe_operation(const Communicator& comm, std::string_view op, std::uint64_t sequence, std::size_t count,
                               DType dtype);

}  // namespace tenax::detail
