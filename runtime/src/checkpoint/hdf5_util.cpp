#include "checkpoint/hdf5_util.hpp"

#include "tenax/error.hpp"

namespace tenax::ckpt::h5 {

herr_t Handle::close() {
  herr_t rc = 0;
  if (id_ >= 0 && closer_) rc = closer_(id_);
  id_ = H5I_INVALID_HID;
  return rc;
}

void Handle::reset() {
  if (id_ >= 0 && closer_) closer_(id_);
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
  hid_t id = H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl);
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

}  // namespace tenax::ckpt::h5
