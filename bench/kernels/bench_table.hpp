// Shared pieces of the kernel bandwidth benchmark: options, one result row per kernel, timing and the printed table.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace tenax::bench {

struct Options {
  std::size_t elements = std::size_t{16} << 20;  // per fp32 array
  int reps = 7;                                  // timed repetitions; the median is reported
  bool cpu = true;
  bool gpu = true;
  bool check = false;  // exit non-zero when a GPU kernel is below the bandwidth target
};

// One kernel's measurement beside its reference (the copy of the same number of bytes, timed in the same run).
struct Row {
  std::string kernel;
  std::string shape;
  double bytes = 0;        // minimum traffic: every input read once, every output written once
  double seconds = 0;      // median time of one call
  double ref_seconds = 0;  // median time of the reference copy moving the same bytes
};

// Median wall time of `reps` calls of f, after one untimed warm-up call.
template <class F>
double median_seconds(int reps, F&& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Prints rows as a table (GB/s = 1e9 bytes/s); `target` > 0 adds a verdict column against that fraction of the
// reference. Returns the number of rows below the target.
int print_table(const std::string& title, const std::string& reference, const std::vector<Row>& rows, double target);

}  // namespace tenax::bench
