// TENAX_CHECK_MPI: MPI calls (communicators must use MPI_ERRORS_RETURN so errors reach this check).
#pragma once

#include <mpi.h>

#include <string>

#include "core/checks.hpp"

namespace tenax::detail {
inline std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(length)) + " (code " + std::to_string(code) + ")";
}
}  // namespace tenax::detail

#define TENAX_CHECK_MPI(call)                                                                            \
  do {                                                                                                   \
    const int tenax_rc_ = (call);                                                                        \
    if (tenax_rc_ != MPI_SUCCESS)                                                                        \
      ::tenax::detail::throw_call_error<::tenax::CommError>("MPI", #call, __FILE__, __LINE__,            \
                                                            ::tenax::detail::mpi_error_text(tenax_rc_)); \
  } while (0)
