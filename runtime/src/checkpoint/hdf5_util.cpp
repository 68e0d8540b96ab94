#include "checkpoint/hdf5_util.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>

#include "tenax/error.hpp"
#include "tenax/log.hpp"

namespace tenax::ckpt::h5 {
namespace {

// An exit that skips HDF5's clean-up: registered after HDF5's own atexit handler, it runs first.
void exit_without_hdf5_termination(int status, void*) {
  std::fflush(nullptr);
  ::_exit(status);
}

// HDF5 1.10 keeps a file whose H5Fclose failed (ENOSPC or EIO while it flushed its metadata) in its ID table, and
// closing it again - which its own atexit handler does at exit (H5F__close_cb <- H5_term_library) - crashes the
// process (SIGSEGV): a full disk at a checkpoint would turn a clean I/O error into a crash reported as one. Such a
// file is never closed again; instead, from then on the process exits with its own status without running HDF5's
// termination (the files tenax wrote are fsynced or removed by then; the abandoned one holds one descriptor).
void after_failed_file_close() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (::on_exit(exit_without_hdf5_termination, nullptr) != 0)
      TENAX_LOG(Warn, "ckpt") << "could not register the exit handler that skips HDF5's clean-up after a failed close";
  });
}

herr_t close_id(hid_t id, Handle::Closer closer) {
  const herr_t rc = closer(id);
  if (rc < 0 && closer == &H5Fclose) after_failed_file_close();
  return rc;
}

}  // namespace

herr_t Handle::close() {
  herr_t rc = 0;
  if (id_ >= 0 && closer_) rc = close_id(id_, closer_);
  id_ = H5I_INVALID_HID;
  return rc;
}

void Handle::reset() {
  if (id_ >= 0 && closer_) close_id(id_, closer_);
  id_ = H5I_INVALID_HID;
}

void silence_errors_on_this_thread() {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

namespace {

herr_t collect(unsigned n, const H5E_error2_t* err, void* data) {
  auto* lines = static_cast<std::vector<std::string>*>(data);
  std::string line = err->desc ? err->desc : "";
  for (char& c : line)
    if (c == '\n') c = ' ';  // sec2 embeds ctime()'s newline
  if (err->func_name) line = std::string(err->func_name) + ": " + line;
  lines->push_back(line);
  return 0;
}

// sec2's messages end in "errno = 28, error message = 'No space left on device', ...": surface that text.
std::string system_error_text(const std::string& line) {
  const std::string key = "error message = '";
  auto at = line.find(key);
  if (at == std::string::npos) return {};
  auto start = at + key.size();
  auto end = line.find('\'', start);
  if (end == std::string::npos) return {};
  std::string text = line.substr(start, end - start);
  auto errno_at = line.find("errno = ");
  if (errno_at != std::string::npos) {
    auto comma = line.find(',', errno_at);
    text += " (" + line.substr(errno_at, comma - errno_at) + ")";
  }
  return text;
}

}  // namespace

std::string take_error_stack() {
  std::vector<std::string> lines;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect, &lines);
  H5Eclear2(H5E_DEFAULT);
  std::string out;
  for (const auto& l : lines) {
    std::string sys = system_error_text(l);
    if (!sys.empty()) {
      out = sys + "; ";
      break;
    }
  }
  std::string detail;
  for (const auto& l : lines) {
    if (!detail.empty()) detail += " <- ";
    detail += l;
    if (detail.size() > 600) break;
  }
  out += detail.empty() ? std::string("no HDF5 error details") : "HDF5: " + detail;
  return out;
}

std::int64_t check(std::int64_t status, const char* what, const std::string& path) {
  if (status < 0) throw IoError(path + ": " + what + " failed: " + take_error_stack());
  return status;
}

Handle file_create(const std::string& path, hid_t fapl) {
  hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  // A create that failed writing the superblock leaves a half-open file behind that HDF5 cannot close at exit either.
  if (id < 0) after_failed_file_close();
  check(id, "H5Fcreate", path);
  return Handle(id, H5Fclose);
}

Handle file_open_read(const std::string& path) {
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  check(id, "H5Fopen", path);
  return Handle(id, H5Fclose);
}

Handle dataspace(const std::vector<std::uint64_t>& dims) {
  std::vector<hsize_t> d(dims.begin(), dims.end());
  hid_t id = H5Screate_simple(static_cast<int>(d.size()), d.data(), nullptr);
  check(id, "H5Screate_simple", "(dataspace)");
  return Handle(id, H5Sclose);
}

Handle scalar_space() {
  hid_t id = H5Screate(H5S_SCALAR);
  check(id, "H5Screate", "(dataspace)");
  return Handle(id, H5Sclose);
}

namespace {
Handle custom_float(std::size_t spos, std::size_t epos, std::size_t esize, std::size_t msize, std::size_t ebias) {
  hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  check(t, "H5Tcopy", "(datatype)");
  Handle h(t, H5Tclose);
  check(H5Tset_fields(t, spos, epos, esize, 0, msize), "H5Tset_fields", "(datatype)");
  check(H5Tset_size(t, 2), "H5Tset_size", "(datatype)");
  check(H5Tset_ebias(t, ebias), "H5Tset_ebias", "(datatype)");
  return h;
}
}  // namespace

Handle type_of(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return Handle(H5Tcopy(H5T_IEEE_F32LE), H5Tclose);
    case DType::F64:
      return Handle(H5Tcopy(H5T_IEEE_F64LE), H5Tclose);
    case DType::I32:
      return Handle(H5Tcopy(H5T_STD_I32LE), H5Tclose);
    case DType::I64:
      return Handle(H5Tcopy(H5T_STD_I64LE), H5Tclose);
    case DType::U8:
      return Handle(H5Tcopy(H5T_STD_U8LE), H5Tclose);
    case DType::F16:  // IEEE binary16: sign 15, exponent 10..14 (bias 15), mantissa 0..9
      return custom_float(15, 10, 5, 10, 15);
    case DType::BF16:  // bfloat16: sign 15, exponent 7..14 (bias 127), mantissa 0..6
      return custom_float(15, 7, 8, 7, 127);
  }
  throw IoError("unknown dtype");
}

Handle lcpl_with_parents() {
  hid_t id = H5Pcreate(H5P_LINK_CREATE);
  check(id, "H5Pcreate", "(lcpl)");
  Handle h(id, H5Pclose);
  check(H5Pset_create_intermediate_group(id, 1), "H5Pset_create_intermediate_group", "(lcpl)");
  return h;
}

void write_attr_u64s(hid_t obj, const char* name, const std::vector<std::uint64_t>& values, const std::string& path) {
  Handle space = dataspace({values.size()});
  Handle attr(check(H5Acreate2(obj, name, H5T_STD_U64LE, space, H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2", path),
              H5Aclose);
  check(H5Awrite(attr, H5T_NATIVE_UINT64, values.data()), "H5Awrite", path);
}

void write_attr_u64(hid_t obj, const char* name, std::uint64_t value, const std::string& path) {
  Handle space = scalar_space();
  Handle attr(check(H5Acreate2(obj, name, H5T_STD_U64LE, space, H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2", path),
              H5Aclose);
  check(H5Awrite(attr, H5T_NATIVE_UINT64, &value), "H5Awrite", path);
}

void write_attr_u32(hid_t obj, const char* name, std::uint32_t value, const std::string& path) {
  Handle space = scalar_space();
  Handle attr(check(H5Acreate2(obj, name, H5T_STD_U32LE, space, H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2", path),
              H5Aclose);
  check(H5Awrite(attr, H5T_NATIVE_UINT32, &value), "H5Awrite", path);
}

void write_attr_string(hid_t obj, const char* name, const std::string& value, const std::string& path) {
  Handle type(check(H5Tcopy(H5T_C_S1), "H5Tcopy", path), H5Tclose);
  check(H5Tset_size(type, value.empty() ? 1 : value.size()), "H5Tset_size", path);
  check(H5Tset_strpad(type, H5T_STR_NULLPAD), "H5Tset_strpad", path);
  Handle space = scalar_space();
  Handle attr(check(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2", path), H5Aclose);
  std::string padded = value.empty() ? std::string(1, '\0') : value;
  check(H5Awrite(attr, type, padded.data()), "H5Awrite", path);
}

namespace {

// Opens attribute `name` and checks it has `want_class` and a simple (or scalar) dataspace of at most max_values
// elements; returns the attribute and its element count.
std::pair<Handle, std::size_t> open_attr(hid_t obj, const char* name, H5T_class_t want_class, std::size_t max_values,
                                         const std::string& path) {
  const std::string where = std::string("attribute '") + name + "'";
  const htri_t exists = H5Aexists(obj, name);
  if (exists <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw IoError(path + ": " + where + " is missing");
  }
  Handle attr(check(H5Aopen(obj, name, H5P_DEFAULT), "H5Aopen", path), H5Aclose);
  Handle type(check(H5Aget_type(attr), "H5Aget_type", path), H5Tclose);
  if (H5Tget_class(type) != want_class) throw IoError(path + ": " + where + " has another type");
  Handle space(check(H5Aget_space(attr), "H5Aget_space", path), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  if (n < 0 || static_cast<std::uint64_t>(n) > max_values)
    throw IoError(path + ": " + where + " has " + std::to_string(n) + " values");
  return {std::move(attr), static_cast<std::size_t>(n)};
}

}  // namespace

std::vector<std::uint64_t> read_attr_u64s(hid_t obj, const char* name, const std::string& path,
                                          std::size_t max_values) {
  auto [attr, n] = open_attr(obj, name, H5T_INTEGER, max_values, path);
  std::vector<std::uint64_t> values(n);
  if (n > 0) check(H5Aread(attr, H5T_NATIVE_UINT64, values.data()), "H5Aread", path);
  return values;
}

std::uint32_t read_attr_u32(hid_t obj, const char* name, const std::string& path) {
  auto [attr, n] = open_attr(obj, name, H5T_INTEGER, 1, path);
  if (n != 1) throw IoError(path + ": attribute '" + std::string(name) + "' is not one value");
  std::uint32_t value = 0;
  check(H5Aread(attr, H5T_NATIVE_UINT32, &value), "H5Aread", path);
  return value;
}

std::string read_attr_string(hid_t obj, const char* name, const std::string& path, std::size_t max_length) {
  auto [attr, n] = open_attr(obj, name, H5T_STRING, 1, path);
  Handle type(check(H5Aget_type(attr), "H5Aget_type", path), H5Tclose);
  if (n != 1 || H5Tis_variable_str(type) != 0)
    throw IoError(path + ": attribute '" + std::string(name) + "' is not a fixed-length string");
  const std::size_t size = H5Tget_size(type);
  if (size == 0 || size > max_length)
    throw IoError(path + ": attribute '" + std::string(name) + "' has " + std::to_string(size) + " characters");
  std::string value(size, '\0');
  check(H5Aread(attr, type, value.data()), "H5Aread", path);
  value.resize(value.find('\0') == std::string::npos ? size : value.find('\0'));
  return value;
}

}  // namespace tenax::ckpt::h5
