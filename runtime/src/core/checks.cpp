#include "core/checks.hpp"

#include <hdf5.h>

#include <cstring>

#include "core/check_hdf5.hpp"

namespace tenax::detail {

std::string format_call_error(std::string_view api, std::string_view call, const char* file, int line,
                              std::string_view detail) {
  std::string_view path(file);
  // Keep the part of the path below the repository's runtime/ folder: the rest is the builder's machine.
  if (const std::size_t at = path.rfind("/src/"); at != std::string_view::npos) path = path.substr(at + 1);
  std::string out;
  out.reserve(api.size() + call.size() + detail.size() + path.size() + 48);
  out += api;
  out += " call `";
  out += call;
  out += "` failed at ";
  out += path;
  out += ':';
  out += std::to_string(line);
  out += ": ";
  out += detail;
  return out;
}

std::string errno_text(int err) {
  char buffer[256];
  // GNU strerror_r returns the message pointer (possibly not into buffer).
  const char* text = strerror_r(err, buffer, sizeof buffer);
  return std::string(text) + " (errno " + std::to_string(err) + ")";
}

std::string hdf5_error_text() {
  std::string text;
  auto walk = [](unsigned n, const H5E_error2_t* e, void* out) -> herr_t {
    auto& s = *static_cast<std::string*>(out);
    if (n >= 4) return 0;  // the innermost few entries say why; the rest is the call chain
    if (!s.empty()) s += "; ";
    s += e->func_name ? e->func_name : "?";
    s += ": ";
    s += e->desc ? e->desc : "";
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk, &text);
  H5Eclear2(H5E_DEFAULT);
  return text.empty() ? std::string("HDF5 reported no detail") : text;
}

}  // namespace tenax::detail
