// Thin RAII and error handling around the HDF5 C API. Only the checkpointer's I/O thread calls these.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tenax/dtype.hpp"

namespace tenax::ckpt::h5 {

// Owns one HDF5 identifier and closes it with the matching H5*close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      closer_ = o.closer_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }
  // Closes now and reports failure (closing a file is where HDF5 writes its metadata). A file whose close failed is
  // never closed again (HDF5 1.10 would crash): the process then skips HDF5's termination at exit (hdf5_util.cpp).
  herr_t close();
  void reset();

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// Silences HDF5's automatic error printing on the calling thread (errors become exceptions instead).
void silence_errors_on_this_thread();

// The calling thread's HDF5 error stack as one line (innermost first), then clears it. When the innermost error
// carries a system error text (e.g. "No space left on device"), it leads the line.
std::string take_error_stack();

// Throws IoError("<path>: <what> failed: <error stack>") when status < 0; returns status otherwise.
std::int64_t check(std::int64_t status, const char* what, const std::string& path);

// Creates the HDF5 file `path` over the empty file the caller created for it (O_CREAT | O_EXCL: the caller's claim on
// the name, so that its clean-up after a failure never removes a file it did not create).
Handle file_create(const std::string& path, hid_t fapl = H5P_DEFAULT);
Handle file_open_read(const std::string& path);
Handle dataspace(const std::vector<std::uint64_t>& dims);
Handle scalar_space();
// The HDF5 type used in files and in memory for a tenax dtype (little-endian; f16 and bf16 as IEEE-style custom
// floats that h5py and h5dump understand).
Handle type_of(DType dtype);
// Link-creation property list that creates missing intermediate groups (tensor names may contain '/').
Handle lcpl_with_parents();

void write_attr_u64s(hid_t obj, const char* name, const std::vector<std::uint64_t>& values, const std::string& path);
void write_attr_u64(hid_t obj, const char* name, std::uint64_t value, const std::string& path);
void write_attr_u32(hid_t obj, const char* name, std::uint32_t value, const std::string& path);
void write_attr_string(hid_t obj, const char* name, const std::string& value, const std::string& path);

// Reading attributes back (the loader cross-checks every block's own attributes with the manifest). Each throws
// IoError naming the path and attribute when it is missing or of another type or size; at most `max_values` values
// and `max_length` characters are read, so a damaged file cannot ask for unbounded memory.
std::vector<std::uint64_t> read_attr_u64s(hid_t obj, const char* name, const std::string& path,
                                          std::size_t max_values = 64);
std::uint32_t read_attr_u32(hid_t obj, const char* name, const std::string& path);
std::string read_attr_string(hid_t obj, const char* name, const std::string& path, std::size_t max_length = 4096);

}  // namespace tenax::ckpt::h5
