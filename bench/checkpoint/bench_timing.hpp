// What the checkpoint benchmarks share: a monotonic clock, the median of repetitions, the slowest rank, pre-touched
// memory, and the lines that make a figure reproducible (the CPU, the load while it ran, the file system it was written
// to).
#pragma once

#include <sys/mman.h>
#include <sys/vfs.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/machine_line.hpp"
#include "tenax/communicator.hpp"
#include "tenax/error.hpp"

namespace tenax::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Page-aligned memory with every page touched, as a training state, staging memory and the references' buffers are (a
// first touch inside a timed copy would time the page faults).
struct Buffer {
  std::uint8_t* data = nullptr;
  std::size_t size = 0;
  explicit Buffer(std::size_t n) : size(n) {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw IoError("bench: cannot map " + std::to_string(n) + " bytes");
    data = static_cast<std::uint8_t*>(p);
    for (std::size_t i = 0; i < n; i += 4096)
      data[i] = static_cast<std::uint8_t>(i * 131 + 7);
  }
  ~Buffer() { ::munmap(data, size); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// A comma-separated list of counts or byte sizes with an optional K/M/G suffix ("64M,256M,1G", "4,40,400").
inline std::vector<std::uint64_t> parse_sizes(const std::string& list) {
  std::vector<std::uint64_t> out;
  for (std::size_t at = 0; at < list.size();) {
    std::size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(at, comma - at);
    std::uint64_t v = std::stoull(item);
    if (item.back() == 'K') v <<= 10;
    if (item.back() == 'M') v <<= 20;
    if (item.back() == 'G') v <<= 30;
    out.push_back(v);
    at = comma + 1;
  }
  return out;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Largest value over ranks: a collective step is as slow as its slowest rank.
inline double max_over_ranks(Communicator& world, double v) {
  world.all_reduce(&v, &v, 1, DType::F64, ReduceOp::Max);
  return v;
}

// The file system type under `path` (or its nearest existing parent: the benchmark creates it) by its statfs magic,
// for the common ones; the hexadecimal magic otherwise.
inline std::string file_system_of(std::string path) {
  struct statfs info {};
  while (statfs(path.c_str(), &info) != 0) {
    const auto slash = path.find_last_of('/');
    if (path.empty() || slash == std::string::npos) return "unknown file system";
    path = slash == 0 ? "/" : path.substr(0, slash);
    if (path == "/" && statfs(path.c_str(), &info) != 0) return "unknown file system";
  }
  switch (static_cast<unsigned long>(info.f_type)) {
    case 0xEF53UL:
      return "ext4";
    case 0x58465342UL:
      return "xfs";
    case 0x9123683EUL:
      return "btrfs";
    case 0x01021994UL:
      return "tmpfs";
    case 0x794C7630UL:
      return "overlayfs";
    case 0x6969UL:
      return "nfs";
    case 0x0BD00BD0UL:
      return "lustre";
    case 0x47504653UL:
      return "gpfs";
    case 0x65735546UL:
      return "fuse";
    case 0x2FC12FC1UL:
      return "zfs";
    default: {
      char hex[32];
      std::snprintf(hex, sizeof hex, "file system 0x%lx", static_cast<unsigned long>(info.f_type));
      return hex;
    }
  }
}

}  // namespace tenax::bench
