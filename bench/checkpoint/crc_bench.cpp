// tenax-bench-crc: the whole-buffer CRC32C that checkpoint loads, dataset checks and manifests use — libtenax's
// crc32c_extend (ISA-L's crc32_iscsi when the build found it) against the in-house SSE4.2 loop, per buffer size, in
// GB/s (median of 15 passes, each over at least 256 MiB of checksumming).
//   tenax-bench-crc [--sizes 4K,64K,1M,64M]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

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

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options options("tenax-bench-crc", "whole-buffer CRC32C: libtenax's (ISA-L when built with it) vs in-house");
  options.add_options()("sizes", "buffer sizes", cxxopts::value<std::string>()->default_value("4K,64K,1M,64M"))(
      "help", "this text");
  const auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  std::printf("%s\n", tenax::bench::machine_line().c_str());
  std::printf("# crc32c_extend is %s\n", tenax::ckpt::crc32c_uses_isal() ? "ISA-L crc32_iscsi" : "the in-house loop");
  std::printf("%12s %18s %18s %8s\n", "bytes", "crc32c_extend GB/s", "in-house GB/s", "ratio");
  std::string list = args["sizes"].as<std::string>();
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::size_t bytes = parse_size(list.substr(at, comma - at));
    at = comma + 1;
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
  return 0;
}
