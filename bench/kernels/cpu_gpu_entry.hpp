// The benchmark's two halves, called by main.cpp.
#pragma once

#include "bench_table.hpp"

namespace tenax::bench {

void run_cpu_benchmarks(const Options& o);
// Returns the number of GPU kernels below the bandwidth target (80% of the device-to-device copy rate).
int run_gpu_benchmarks(const Options& o);

}  // namespace tenax::bench
