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

#include <sys/mman.h>

#include <cxxopts.hpp>

#include "bench_timing.hpp"
#include "checkpoint/crc32c.hpp"

namespace {

std::size_t parse_size(const std::string& text) {
  const char unit = text.empty() ? ' ' : text.back();
  const std::size_t scale = unit == 'K' ? 1ul << 10 : unit == 'M' ? 1ul << 20 : unit == 'G' ? 1ul << 30 : 1;
  return std::stoul(scale == 1 ? text : text.substr(0, text.size() - 1)) * scale;
}

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

std::vector<std::size_t> parse_sizes(const std::string& list) {
  std::vector<std::size_t> sizes;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    sizes.push_back(parse_size(list.substr(at, comma - at)));
    at = comma + 1;
  }
  return sizes;
}

// Page-aligned (the staging buffer's blocks are 4 KiB-aligned) and touched, as a training state and staging memory are.
struct Pages {
  unsigned char* data;
  std::size_t bytes;
  explicit Pages(std::size_t n) : bytes(n) {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p);
    for (std::size_t i = 0; data != nullptr && i < n; ++i)
      data[i] = static_cast<unsigned char>(i * 131 + 7);
  }
  ~Pages() {
    if (data != nullptr) ::munmap(data, bytes);
  }
  Pages(const Pages&) = delete;
  Pages& operator=(const Pages&) = delete;
};

double seconds_of(auto&& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Each kernel against memcpy, alternating within every repetition so that a busy host slows all alike.
int compare_copy_kernels(const std::vector<std::size_t>& sizes) {
  const auto kernels = tenax::ckpt::crc32c_copy_kernels();
  std::printf("# fused copy + CRC32C kernels against memcpy (time ratio, 15 alternating reps, median)\n");
  std::printf("%12s %10s", "bytes", "memcpy s");
  for (const auto& kernel : kernels)
    std::printf(" %22s", kernel.name);
  std::printf("\n");
  for (const std::size_t bytes : sizes) {
    Pages src(bytes), dst(bytes);
    if (src.data == nullptr || dst.data == nullptr) {
      std::fprintf(stderr, "tenax-bench-crc: cannot map 2 x %zu bytes\n", bytes);
      return 1;
    }
    const std::uint32_t want = tenax::ckpt::crc32c_extend(0, src.data, bytes);
    std::vector<double> copy;
    std::vector<std::vector<double>> fused(kernels.size());
    for (int rep = 0; rep < 15; ++rep) {
      copy.push_back(seconds_of([&] { std::memcpy(dst.data, src.data, bytes); }));
      for (std::size_t k = 0; k < kernels.size(); ++k) {
        std::uint32_t crc = 0;
        fused[k].push_back(seconds_of([&] { crc = kernels[k].copy(dst.data, src.data, bytes, 0); }));
        if (crc != want || std::memcmp(dst.data, src.data, bytes) != 0) {
          std::fprintf(stderr, "tenax-bench-crc: kernel %s copied or checksummed %zu bytes wrongly\n", kernels[k].name,
                       bytes);
          return 1;
        }
      }
    }
    const double reference = median(copy);
    std::printf("%12zu %10.4f", bytes, reference);
    for (const auto& times : fused)
      std::printf(" %21.2fx", median(times) / reference);
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
  for (const std::size_t bytes : parse_sizes(args["sizes"].as<std::string>())) {
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
  const std::string copy_sizes = args["copy-sizes"].as<std::string>();
  if (copy_sizes != "none") return compare_copy_kernels(parse_sizes(copy_sizes));
  return 0;
}
