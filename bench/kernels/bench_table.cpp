#include "bench_table.hpp"

#include <cstdio>

namespace tenax::bench {

int print_table(const std::string& title, const std::string& reference, const std::vector<Row>& rows, double target) {
  std::printf("\n%s\n", title.c_str());
  std::printf(
      "(GB/s = (bytes read + bytes written) / median time; the reference copies half the kernel's bytes, so\n"
      " both move the same traffic; ratio = kernel GB/s / reference GB/s)\n");
  std::printf("%-26s %-22s %10s %10s %10s %12s %7s%s\n", "kernel", "shape", "MiB moved", "time ms", "GB/s",
              (reference + " GB/s").c_str(), "ratio", target > 0 ? "  verdict" : "");
  int below = 0;
  for (const Row& r : rows) {
    const double gbps = r.bytes / r.seconds / 1e9;
    const double ref_gbps = r.bytes / r.ref_seconds / 1e9;
    const double ratio = gbps / ref_gbps;
    std::printf("%-26s %-22s %10.1f %10.3f %10.2f %12.2f %6.0f%%", r.kernel.c_str(), r.shape.c_str(),
                r.bytes / (1 << 20), r.seconds * 1e3, gbps, ref_gbps, ratio * 100);
    if (target > 0) {
      const bool ok = ratio >= target;
      below += ok ? 0 : 1;
      std::printf("  %s", ok ? "ok" : "BELOW TARGET");
    }
    std::printf("\n");
  }
  return below;
}

}  // namespace tenax::bench
