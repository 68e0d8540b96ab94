// format_op_profile (tenax/op_profile.hpp): the op profile as a table for people.
#include <algorithm>
#include <cstdio>
#include <string>

#include "tenax/op_profile.hpp"

namespace tenax {
namespace {

std::string printf_string(const char* format, auto... args) {
  const int n = std::snprintf(nullptr, 0, format, args...);
  std::string out(static_cast<std::size_t>(std::max(n, 0)), '\0');
  std::snprintf(out.data(), out.size() + 1, format, args...);
  return out;
}

}  // namespace

std::string format_op_profile(const OpProfile& profile, std::int64_t steps) {
  const double per = steps > 0 ? static_cast<double>(steps) : 1.0;
  const char* unit = steps > 0 ? "step" : "window";
  std::size_t op_width = 2, shape_width = 5;
  for (const OpProfileRow& r : profile.rows) {
    op_width = std::max(op_width, r.op.size() + (r.dtype.empty() ? 0 : r.dtype.size() + 1));
    shape_width = std::max(shape_width, r.shape.size());
  }
  std::string out =
      printf_string("# op profile (%s): %.3f ms per %s over %lld %s(s); exclusive time per op\n", profile.clock.c_str(),
                    1e3 * profile.seconds / per, unit, static_cast<long long>(steps > 0 ? steps : 1), unit);
  const std::string calls = std::string("calls/") + unit, ms = std::string("ms/") + unit;
  out += printf_string("%-*s %-*s %7s %12s %12s %10s %10s\n", static_cast<int>(op_width), "op",
                       static_cast<int>(shape_width), "shape", "share", calls.c_str(), ms.c_str(), "TFLOP/s", "GB/s");
  for (const OpProfileRow& r : profile.rows) {
    const std::string name = r.dtype.empty() ? r.op : r.op + " " + r.dtype;
    const double share = profile.seconds > 0 ? 100.0 * r.seconds / profile.seconds : 0.0;
    const std::string tflops = r.flops > 0 && r.seconds > 0 ? printf_string("%.3g", r.flops / r.seconds * 1e-12) : "";
    const std::string gbs = r.bytes > 0 && r.seconds > 0 ? printf_string("%.3g", r.bytes / r.seconds * 1e-9) : "";
    out += printf_string("%-*s %-*s %6.1f%% %12.1f %12.3f %10s %10s\n", static_cast<int>(op_width), name.c_str(),
                         static_cast<int>(shape_width), r.shape.c_str(), share, static_cast<double>(r.calls) / per,
                         1e3 * r.seconds / per, tflops.c_str(), gbs.c_str());
  }
  return out;
}

}  // namespace tenax
