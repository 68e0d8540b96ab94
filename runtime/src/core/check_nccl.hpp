// TENAX_CHECK_NCCL: NCCL calls. ncclInProgress is not an error here: non-blocking communicators return it from
// operations that are still being set up, and the caller polls ncclCommGetAsyncError.
#pragma once

#include <nccl.h>

#include <string>

#include "core/checks.hpp"

#define TENAX_CHECK_NCCL(call)                                                                  \
  do {                                                                                          \
    const ncclResult_t tenax_rc_ = (call);                                                      \
    if (tenax_rc_ != ncclSuccess && tenax_rc_ != ncclInProgress)                                \
      ::tenax::detail::throw_call_error<::tenax::CommError>(                                    \
          "NCCL", #call, __FILE__, __LINE__,                                                    \
          std::string(ncclGetErrorString(tenax_rc_)) + " (" + ncclGetLastError(nullptr) + ")"); \
  } while (0)
