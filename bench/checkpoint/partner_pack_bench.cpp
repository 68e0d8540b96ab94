// tenax-bench-partner-pack: what packing a node-local step for its partner costs (the I/O thread reads the committed
// step back into one buffer with a CRC32C over it: ckpt::pack_step), against read(2) of the same files
// into one buffer of their size, hot, in the same run; and how much memory the packing takes beyond its result.
//
//   tenax-bench-partner-pack --sizes 64M,256M,1G --reps 5
//
// Per size: a step directory with a manifest and one rank file of that size (random bytes), in the page cache.
// "pack" packs into a new buffer each time, "reused" into one buffer again and again (what the checkpointer does
// from its second exchange on); both as a ratio to that reference. "extra" is the peak resident memory of the first
// pack beyond the memory in use before it, over the bytes packed: 1.0 means the packed buffer alone. Sizes must grow
// from row to row for it to be measured (the peak is the process's).
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <cxxopts.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "checkpoint/crc32c.hpp"
#include "checkpoint/local_tier.hpp"
#include "tenax/error.hpp"

namespace {

using tenax::bench::Clock;
using tenax::bench::median;
using tenax::bench::seconds_since;

long resident_kib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

long peak_kib() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

void write_random(const std::string& path, std::uint64_t bytes) {
  std::vector<std::uint64_t> block(1 << 17);  // 1 MiB
  std::mt19937_64 random(bytes);
  std::ofstream out(path, std::ios::binary);
  for (std::uint64_t done = 0; done < bytes;) {
    for (auto& w : block)
      w = random();
    const std::uint64_t n = std::min<std::uint64_t>(bytes - done, block.size() * 8);
    out.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(n));
    done += n;
  }
  if (!out) throw tenax::IoError("bench: cannot write " + path);
}

// The reference: read(2) of every file of the step into one buffer of their total size, and a CRC32C over it.
double read_reference(const std::string& dir, std::vector<std::uint8_t>& buffer) {
  const auto t0 = Clock::now();
  std::size_t at = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const int fd = ::open(entry.path().c_str(), O_RDONLY);
    if (fd < 0) throw tenax::IoError("bench: open " + entry.path().string());
    for (ssize_t n; (n = ::read(fd, buffer.data() + at, buffer.size() - at)) > 0;)
      at += static_cast<std::size_t>(n);
    ::close(fd);
  }
  volatile std::uint32_t crc = tenax::ckpt::crc32c_extend(0, buffer.data(), at);
  (void)crc;
  return seconds_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options cli("tenax-bench-partner-pack", "Packing a node-local step for its partner against read(2)");
  cli.add_options()("sizes", "Rank-file sizes, growing (K/M/G suffixes)",
                    cxxopts::value<std::string>()->default_value("64M,256M,1G"))(
      "reps", "Packs per size (median reported)", cxxopts::value<int>()->default_value("5"))(
      "dir", "Scratch directory", cxxopts::value<std::string>()->default_value("/tmp/tenax-bench-partner-pack"))(
      "h,help", "Show this help");
  auto args = cli.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", cli.help().c_str());
    return 0;
  }
  const int reps = std::max(1, args["reps"].as<int>());
  const std::string root = args["dir"].as<std::string>();
  std::filesystem::create_directories(root);
  std::printf("# tenax-bench-partner-pack: %d packs per size (median), dir %s (%s), page cache hot\n", reps,
              root.c_str(), tenax::bench::file_system_of(root).c_str());
  std::printf("%s\n", tenax::bench::machine_line().c_str());
  std::printf("%10s | %9s %9s %9s | %7s %7s | %6s\n", "size", "pack s", "reused s", "read s", "pack", "reused",
              "extra");
  for (std::uint64_t bytes : tenax::bench::parse_sizes(args["sizes"].as<std::string>())) {
    const std::string dir = root + "/step_" + std::to_string(bytes);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    write_random(dir + "/manifest.json", 4096);
    write_random(dir + "/rank_00000.h5", bytes);
    // Warm the page cache (through a small buffer), then the first pack's peak memory beyond what was resident.
    std::vector<std::uint8_t> reference_buffer(1 << 20);
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const int fd = ::open(entry.path().c_str(), O_RDONLY);
      while (fd >= 0 && ::read(fd, reference_buffer.data(), reference_buffer.size()) > 0) {
      }
      if (fd >= 0) ::close(fd);
    }
    const long before = resident_kib(), peak_before = peak_kib();
    std::size_t packed_bytes = tenax::ckpt::pack_step(dir).size();
    const long peak_after = peak_kib();
    // A new buffer per pack (its pages faulted in each time), and one buffer packed into again and again (what the
    // checkpointer does from the second exchange on).
    std::vector<double> pack, reused, read;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = Clock::now();
      packed_bytes = tenax::ckpt::pack_step(dir).size();
      pack.push_back(seconds_since(t0));
    }
    tenax::ckpt::PackedStep again;
    tenax::ckpt::pack_step(dir, again);
    for (int r = 0; r < reps; ++r) {
      const auto t0 = Clock::now();
      tenax::ckpt::pack_step(dir, again);
      reused.push_back(seconds_since(t0));
    }
    again = {};
    again.shrink_to_fit();
    reference_buffer.resize(bytes + 4096);
    std::memset(reference_buffer.data(), 0, reference_buffer.size());  // touched: the reference counts no page faults
    for (int r = 0; r < reps; ++r)
      read.push_back(read_reference(dir, reference_buffer));
    const double p = median(pack), u = median(reused), f = median(read);
    char extra[32];
    if (peak_after > peak_before)
      std::snprintf(extra, sizeof extra, "%.2f", static_cast<double>(peak_after - before) * 1024.0 / packed_bytes);
    else
      std::snprintf(extra, sizeof extra, "?");  // below an earlier peak: sizes must grow
    std::printf("%9.0fM | %9.4f %9.4f %9.4f | %6.2fx %6.2fx | %6s\n", static_cast<double>(bytes) / (1 << 20), p, u, f,
                p / f, u / f, extra);
    std::filesystem::remove_all(dir);
  }
  return 0;
}
