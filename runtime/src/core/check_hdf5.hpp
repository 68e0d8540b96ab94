// TENAX_CHECK_HDF5: HDF5 calls, which signal failure with a negative return (herr_t or hid_t). The message carries
// the innermost entries of HDF5's own error stack (the library's reason), and the file the call concerned.
#pragma once

#include <hdf5.h>

#include <string>

#include "core/checks.hpp"

namespace tenax::detail {
// The current HDF5 error stack as one line ("H5Dwrite: can't write data; H5FD_write: file write failed; ...").
std::string hdf5_error_text();
}  // namespace tenax::detail

// Yields the call's result (an hid_t or herr_t) when it is not negative.
#define TENAX_CHECK_HDF5(call, path)                                                                         \
  ([&]() {                                                                                                   \
    auto tenax_result_ = (call);                                                                             \
    if (tenax_result_ < 0)                                                                                   \
      ::tenax::detail::throw_call_error<::tenax::IoError>(                                                   \
          "HDF5", #call, __FILE__, __LINE__, std::string(path) + ": " + ::tenax::detail::hdf5_error_text()); \
    return tenax_result_;                                                                                    \
  }())
