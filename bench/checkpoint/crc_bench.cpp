// tenax-bench-crc: the whole-buffer CRC32C that checkpoint loads, dataset checks and manifests use — libtenax's
// crc32c_extend (ISA-L's crc32_iscsi when the build found it) against the in-house SSE4.2 loop, per buffer size, in
// GB/s (median of 15 passes, each over at least 256 MiB of checksumming). Then every fused copy + CRC32C kernel this
// CPU has (the staging pass of save(); the first listed is the one it uses) against memcpy of the same bytes between
// the same pre-touched buffers, 15 alternating repetitions, median time relative to memcpy's.
//   tenax-bench-crc [--sizes 4K,64K,1M,64M] [--copy-sizes 64M,256M,1G]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "bench_timing.hpp"
#include "checkpoint/crc32c.hpp"

namespace {

template <class F>
double median_gbps(std::size_t bytes, F checksum) {
  const std::size_t reps = std::max<std::size_t>(1, (std::size_t{256} << 20) / bytes);
  std::vector<double> rates;
  std::uint32_t sink = 0;
  for (int pass = 0; pass < 15; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t r = 0; r < reps; ++r)
      sink ^= checksum();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(static_cast<double>(bytes * reps) / seconds / 1e9);
  }
  if (sink == 0x5eed) std::printf(" ");  // keeps the checksums from being optimised away
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

double seconds_of(auto&& work) {
  const auto start = tenax::bench::Clock::now();
  work();
  return tenax::bench::seconds_since(start);
}

// Each kernel against memcpy, in turns within every repetition (the first of the turn rotating) so that a busy host
// or the previous turn's cache state weighs on all alike.
int compare_copy_kernels(const std::vector<std::uint64_t>& sizes) {
  const auto kernels = tenax::ckpt::crc32c_copy_kernels();
  std::printf("# fused copy + CRC32C kernels against memcpy (time ratio, 15 rotating reps, median); save() uses %s\n",
              kernels.front().name);
  std::printf("%12s %10s", "bytes", "memcpy s");
  for (const auto& kernel : kernels)
    std::printf(" %22s", kernel.name);
  std::printf("\n");
  for (const std::uint64_t bytes : sizes) {
    if (bytes < (std::uint64_t{1} << 20)) {
      std::fprintf(stderr, "tenax-bench-crc: copy size %llu is below 1M: one call is too short to time\n",
                   static_cast<unsigned long long>(bytes));
      return 2;
    }
    const tenax::bench::Buffer src(bytes), dst(bytes);  // IoError when it cannot map them
    const std::uint32_t want = tenax::ckpt::crc32c_extend(0, src.data, bytes);
    // Turn 0 is memcpy, turn k the kernel k - 1.
    std::vector<std::vector<double>> times(kernels.size() + 1);
    for (std::size_t rep = 0; rep < 15; ++rep) {
      for (std::size_t t = 0; t < times.size(); ++t) {
        const std::size_t turn = (rep + t) % times.size();
        if (turn == 0) {
          times[0].push_back(seconds_of([&] { std::memcpy(dst.data, src.data, bytes); }));
          continue;
        }
        const auto& kernel = kernels[turn - 1];
        std::uint32_t crc = 0;
        times[turn].push_back(seconds_of([&] { crc = kernel.copy(dst.data, src.data, bytes, 0); }));
        if (crc != want || std::memcmp(dst.data, src.data, bytes) != 0) {
          std::fprintf(stderr, "tenax-bench-crc: kernel %s copied or checksummed %llu bytes wrongly\n", kernel.name,
                       static_cast<unsigned long long>(bytes));
          return 1;
        }
      }
    }
    const double reference = tenax::bench::median(times[0]);
    std::printf("%12llu %10.4f", static_cast<unsigned long long>(bytes), reference);
    for (std::size_t k = 1; k < times.size(); ++k)
      std::printf(" %21.2fx", tenax::bench::median(times[k]) / reference);
    std::printf("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options options("tenax-bench-crc", "whole-buffer CRC32C: libtenax's (ISA-L when built with it) vs in-house");
  options.add_options()("sizes", "buffer sizes", cxxopts::value<std::string>()->default_value("4K,64K,1M,64M"))(
      "copy-sizes", "sizes of the copy + CRC32C comparison (none: skip it)",
      cxxopts::value<std::string>()->default_value("64M,256M,1G"))("help", "this text");
  const auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  std::printf("%s\n", tenax::bench::machine_line().c_str());
  std::printf("# crc32c_extend is %s\n", tenax::ckpt::crc32c_uses_isal() ? "ISA-L crc32_iscsi" : "the in-house loop");
  std::printf("%12s %18s %18s %8s\n", "bytes", "crc32c_extend GB/s", "in-house GB/s", "ratio");
  std::vector<std::uint64_t> sizes, copy_sizes;
  try {
    sizes = tenax::bench::parse_sizes(args["sizes"].as<std::string>());
    if (args["copy-sizes"].as<std::string>() != "none")
      copy_sizes = tenax::bench::parse_sizes(args["copy-sizes"].as<std::string>());
  } catch (const std::exception&) {
    std::fprintf(stderr, "tenax-bench-crc: sizes are comma-separated numbers of bytes with an optional K, M or G\n");
    return 2;
  }
  for (const std::uint64_t bytes : sizes) {
    std::vector<unsigned char> buffer(bytes);
    for (std::size_t i = 0; i < bytes; ++i)
      buffer[i] = static_cast<unsigned char>(i * 131 + 7);
    if (tenax::ckpt::crc32c_extend(0, buffer.data(), bytes) !=
        tenax::ckpt::crc32c_extend_in_house(0, buffer.data(), bytes)) {
      std::fprintf(stderr, "tenax-bench-crc: the two paths disagree at %zu bytes\n", bytes);
      return 1;
    }
    const double library = median_gbps(bytes, [&] { return tenax::ckpt::crc32c_extend(0, buffer.data(), bytes); });
    const double in_house =
        median_gbps(bytes, [&] { return tenax::ckpt::crc32c_extend_in_house(0, buffer.data(), bytes); });
    std::printf("%12zu %18.1f %18.1f %7.2fx\n", bytes, library, in_house, library / in_house);
  }
  if (copy_sizes.empty()) return 0;
  try {
    return compare_copy_kernels(copy_sizes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tenax-bench-crc: %s\n", e.what());
    return 1;
  }
}
