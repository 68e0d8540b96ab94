// Check macros, one per foreign API, all with the same shape: evaluate the call once, and on failure throw the
// matching tenax exception with the call's text, file:line and the API's own error text. The API-specific macros live
// in check_mpi.hpp, check_cuda.hpp, check_nccl.hpp and check_hdf5.hpp so that each translation unit includes only the
// foreign headers it uses; this header holds the system-call macro and the shared formatting.
#pragma once

#include <cerrno>
#include <string>
#include <string_view>

#include "tenax/error.hpp"

namespace tenax::detail {

// "<api> call `<call>` failed at <file>:<line>: <detail>"
std::string format_call_error(std::string_view api, std::string_view call, const char* file, int line,
                              std::string_view detail);

template <class E>
[[noreturn]] void throw_call_error(std::string_view api, std::string_view call, const char* file, int line,
                                   std::string_view detail) {
  throw E(format_call_error(api, call, file, line, detail));
}

std::string errno_text(int err);

}  // namespace tenax::detail

// System calls returning -1 with errno: retried on EINTR, then IoError with strerror. Yields the call's result.
//   int fd = TENAX_CHECK_SYS(open(path, O_RDONLY));
#define TENAX_CHECK_SYS(call)                                                                  \
  ([&]() {                                                                                     \
    for (;;) {                                                                                 \
      auto tenax_result_ = (call);                                                             \
      if (tenax_result_ != -1) return tenax_result_;                                           \
      if (errno == EINTR) continue;                                                            \
      ::tenax::detail::throw_call_error<::tenax::IoError>("system", #call, __FILE__, __LINE__, \
                                                          ::tenax::detail::errno_text(errno)); \
    }                                                                                          \
  }())

// Same, with the path the call acted on named in the message (what a user needs to find the problem).
#define TENAX_CHECK_SYS_PATH(call, path)                                                                       \
  ([&]() {                                                                                                     \
    for (;;) {                                                                                                 \
      auto tenax_result_ = (call);                                                                             \
      if (tenax_result_ != -1) return tenax_result_;                                                           \
      if (errno == EINTR) continue;                                                                            \
      ::tenax::detail::throw_call_error<::tenax::IoError>(                                                     \
          "system", #call, __FILE__, __LINE__, std::string(path) + ": " + ::tenax::detail::errno_text(errno)); \
    }                                                                                                          \
  }())
