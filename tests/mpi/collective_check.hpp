// Exact checks of every collective of a Communicator: inputs are generated from (rank, index, salt) on every rank, so
// each rank can compute the expected result of any operation itself, in float64 (floats) or exactly (integers).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tenax/communicator.hpp"

namespace tenax::test {

// Element counts covering the edge cases: empty, one element, an odd count, and 1 MiB + 7 elements (an odd count
// past the sizes where MPI switches to its large-message algorithms).
inline constexpr std::size_t kSmallCounts[] = {0, 1, 37};
inline std::size_t large_count(DType t) {
  return (std::size_t{1} << 20) / dtype_size(t) + 7;
}

void check_all_reduce(Communicator& comm, DType dtype, ReduceOp op, std::size_t count, std::uint32_t salt);
void check_all_reduce_in_place(Communicator& comm, DType dtype, std::size_t count, std::uint32_t salt);
void check_all_gather(Communicator& comm, DType dtype, std::size_t count, std::uint32_t salt, bool in_place);
void check_reduce_scatter(Communicator& comm, DType dtype, ReduceOp op, std::size_t count, std::uint32_t salt);
void check_broadcast(Communicator& comm, DType dtype, std::size_t count, int root, std::uint32_t salt);
void check_send_recv_ring(Communicator& comm, DType dtype, std::size_t count, std::uint32_t salt);
void check_send_then_recv(Communicator& comm, DType dtype, std::size_t count, std::uint32_t salt);

// Every operation above for every dtype and count (the full matrix for one communicator).
void check_everything(Communicator& comm, std::uint32_t salt);

}  // namespace tenax::test
