// tenax's exception hierarchy. Every failure inside the library is one of these; the message always says what failed,
// where, and (when there is one) what to do about it.
//
//   Error                 base of everything tenax throws
//   ├─ UsageError         bad configuration, options or arguments: the user must change something; never retried
//   ├─ CommError          a communicator operation failed (MPI/NCCL error, peer gone, communicator aborted)
//   │  └─ TimeoutError    a blocking operation exceeded TENAX_COMM_TIMEOUT
//   ├─ IoError            a file-system or HDF5 call failed (carries the path)
//   │  └─ DataError       data that is not what it must be: a damaged, truncated or foreign dataset or tokenizer, or a
//   │                     path that holds none. No retry mends it, so a program that checks its data before training
//   │                     may treat it as a usage error; a plain IoError (EIO, a stale handle) may pass.
//   └─ DeviceError        a CUDA call failed
#pragma once

#include <stdexcept>
#include <string>

namespace tenax {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class UsageError : public Error {
 public:
  using Error::Error;
};

class CommError : public Error {
 public:
  using Error::Error;
};

class TimeoutError : public CommError {
 public:
  using CommError::CommError;
};

class IoError : public Error {
 public:
  using Error::Error;
};

class DataError : public IoError {
 public:
  using IoError::IoError;
};

class DeviceError : public Error {
 public:
  using Error::Error;
};

}  // namespace tenax
