// tenax-bench-kernels: each kernel's achieved bandwidth beside the copy rate of the same bytes measured in the same
// run (single-thread memcpy on the CPU, device-to-device cudaMemcpy on a GPU), plus matmul rates.
#include <cxxopts.hpp>

#include <cstdio>
#include <exception>

#include "bench_table.hpp"
#include "common/machine_line.hpp"
#include "cpu_gpu_entry.hpp"
#include "tenax/kernels/config.hpp"
#include "tenax/kernels/device.hpp"

int main(int argc, char** argv) {
  cxxopts::Options spec("tenax-bench-kernels", "Bandwidth of tenax's kernels against the copy rate of the same bytes");
  spec.add_options()("mib", "MiB per fp32 array on the CPU (the GPU uses 4x)",
                     cxxopts::value<std::size_t>()->default_value("64"))("reps", "timed repetitions (median reported)",
                                                                         cxxopts::value<int>()->default_value("7"))(
      "cpu-only", "skip the GPU part")("gpu-only", "skip the CPU part")(
      "check", "exit 1 when a GPU kernel is below 80% of the device-to-device copy rate")("h,help", "this help");
  try {
    const auto args = spec.parse(argc, argv);
    if (args.count("help")) {
      std::printf("%s\n", spec.help().c_str());
      return 0;
    }
    tenax::bench::Options o;
    o.elements = (args["mib"].as<std::size_t>() << 20) / sizeof(float);
    o.reps = args["reps"].as<int>();
    o.cpu = !args.count("gpu-only");
    o.gpu = !args.count("cpu-only");
    o.check = args.count("check") > 0;
    if (o.elements < (std::size_t{1} << 18) || o.reps < 1) {
      std::fprintf(stderr, "tenax-bench-kernels: --mib must be >= 1 and --reps >= 1\n");
      return 2;
    }
    std::printf("%s\n", tenax::bench::machine_line().c_str());
    if (o.cpu) tenax::bench::run_cpu_benchmarks(o);
    if (!o.gpu) return 0;
    if (!tenax::kernels::cuda::device_available()) {
      std::printf("\nNo usable CUDA device (or a build without CUDA): GPU part skipped.\n");
      return 0;
    }
#if TENAX_HAVE_CUDA
    const int below = tenax::bench::run_gpu_benchmarks(o);
    if (below > 0) std::printf("\n%d kernel(s) below 80%% of the device-to-device copy rate\n", below);
    return o.check && below > 0 ? 1 : 0;
#endif
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tenax-bench-kernels: %s\n", e.what());
    return 2;
  }
  return 0;
}
