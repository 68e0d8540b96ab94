#include "core/host_memory.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "core/file_system.hpp"
#include "tenax/error.hpp"

namespace tenax::detail {

namespace {

std::atomic<std::uint64_t> charged{0};
std::atomic<std::uint64_t> limit_in_force{0};  // 0: none
std::atomic<std::uint64_t*> shared_in_force{nullptr};
std::atomic<std::uint64_t> added_to_shared{0};  // what this process added to *shared_in_force
std::mutex explain_mutex;
HostMemoryLimit::Explain explain_in_force;

std::atomic_ref<std::uint64_t> shared_word(std::uint64_t* word) {
  return std::atomic_ref<std::uint64_t>(*word);
}

// The file's text, or nullopt when it cannot be read (a missing cgroup file is normal: another hierarchy).
std::optional<std::string> read_text(const std::string& path) {
  try {
    return fs::read_file(path);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// A whole decimal number (trailing white space allowed), or nullopt.
std::optional<std::uint64_t> parse_count(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.remove_suffix(1);
  if (text.empty() || text.size() > 20) return std::nullopt;
  std::uint64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    if (__builtin_mul_overflow(n, 10u, &n) || __builtin_add_overflow(n, static_cast<unsigned>(c - '0'), &n))
      return std::nullopt;
  }
  return n;
}

// The value of `key` in a "key value[ kB]" table (/proc/meminfo, memory.stat), or nullopt.
std::optional<std::uint64_t> table_value(std::string_view table, std::string_view key) {
  std::size_t at = 0;
  while (at < table.size()) {
    std::size_t end = table.find('\n', at);
    if (end == std::string_view::npos) end = table.size();
    std::string_view line = table.substr(at, end - at);
    at = end + 1;
    if (line.size() <= key.size() || line.substr(0, key.size()) != key) continue;
    line.remove_prefix(key.size());
    if (line.front() == ':') line.remove_prefix(1);
    if (line.empty() || line.front() != ' ') continue;  // another key that starts the same
    while (!line.empty() && line.front() == ' ')
      line.remove_prefix(1);
    std::uint64_t scale = 1;
    if (line.size() > 3 && line.substr(line.size() - 3) == " kB") line.remove_suffix(3), scale = 1024;
    const std::optional<std::uint64_t> n = parse_count(line);
    std::uint64_t bytes = 0;
    if (!n || __builtin_mul_overflow(*n, scale, &bytes)) return std::nullopt;
    return bytes;
  }
  return std::nullopt;
}

struct Room {
  std::uint64_t bytes;
  std::uint64_t limit;
};

// The room one cgroup directory leaves, or nullopt without a limit there (v2 "max", v1's "unlimited" 2^63 - page).
std::optional<Room> cgroup_room(const std::string& dir, bool v2) {
  const std::optional<std::string> limit_text = read_text(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
  const std::optional<std::string> usage_text = read_text(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
  if (!limit_text || !usage_text) return std::nullopt;
  const std::optional<std::uint64_t> limit = parse_count(*limit_text), usage = parse_count(*usage_text);
  if (!limit || !usage || *limit >= (std::uint64_t{1} << 62)) return std::nullopt;
  // The page cache the kernel can reclaim: tmpfs and shared memory (a node-local checkpoint tier in /dev/shm, MPI's
  // segments) count as cache but stay until deleted.
  const std::optional<std::string> stat = read_text(dir + "/memory.stat");
  std::uint64_t cache = 0;
  if (stat) {
    const std::uint64_t file = table_value(*stat, v2 ? "file" : "total_cache").value_or(0);
    const std::uint64_t shmem = table_value(*stat, v2 ? "shmem" : "total_shmem").value_or(0);
    cache = file > shmem ? file - shmem : 0;
  }
  const std::uint64_t held = *usage > cache ? *usage - cache : 0;
  return Room{*limit > held ? *limit - held : 0, *limit};
}

}  // namespace

std::uint64_t charged_host_memory() noexcept {
  return charged.load();
}

void charge_host_memory(std::uint64_t bytes) {
  std::uint64_t before = charged.fetch_add(bytes);
  const std::uint64_t limit = limit_in_force.load();
  if (limit == 0) return;
  std::uint64_t after = 0;
  if (std::uint64_t* shared = shared_in_force.load(); shared != nullptr) {
    // Added only when it fits (compare and swap): a refused charge never shows in the other processes' totals.
    std::atomic_ref<std::uint64_t> total = shared_word(shared);
    before = total.load();
    while (!__builtin_add_overflow(before, bytes, &after) && after <= limit)
      if (total.compare_exchange_weak(before, after)) {
        added_to_shared.fetch_add(bytes);
        return;
      }
  } else if (!__builtin_add_overflow(before, bytes, &after) && after <= limit) {
    return;
  }
  charged.fetch_sub(bytes);
  std::lock_guard lock(explain_mutex);
  throw UsageError(explain_in_force ? explain_in_force(before, bytes, limit)
                                    : "host memory: " + format_bytes(bytes) + " more is over the limit of " +
                                          format_bytes(limit) + " (TENAX_MEMORY_LIMIT)");
}

void release_host_memory(std::uint64_t bytes) noexcept {
  charged.fetch_sub(bytes);
  std::uint64_t* shared = shared_in_force.load();
  if (shared == nullptr) return;
  // At most what this process added: buffers charged before the limit never reached the shared total. (Which
  // buffer was charged when is not kept: one from before the limit freed while it is in force takes back some of
  // this process's later charges, so the total may read low by that much until the limit is lifted.)
  std::uint64_t added = added_to_shared.load(), taken = 0;
  do
    taken = std::min(added, bytes);
  while (!added_to_shared.compare_exchange_weak(added, added - taken));
  if (taken > 0) shared_word(shared).fetch_sub(taken);
}

HostMemoryLimit::HostMemoryLimit(std::uint64_t limit, Explain explain, std::uint64_t* shared_total) {
  std::lock_guard lock(explain_mutex);
  if (limit_in_force.load() != 0) throw std::logic_error("HostMemoryLimit: a limit is already in force");
  explain_in_force = std::move(explain);
  added_to_shared.store(0);
  shared_in_force.store(shared_total);
  limit_in_force.store(limit == 0 ? 1 : limit);  // 0 would read as "none"
}

HostMemoryLimit::~HostMemoryLimit() {
  std::lock_guard lock(explain_mutex);
  limit_in_force.store(0);
  shared_in_force.store(nullptr);
  explain_in_force = nullptr;
}

std::optional<AvailableMemory> available_host_memory(const std::string& proc, const std::string& cgroup_root) {
  std::optional<AvailableMemory> best;
  if (const std::optional<std::string> meminfo = read_text(proc + "/meminfo"))
    if (const std::optional<std::uint64_t> bytes = table_value(*meminfo, "MemAvailable"))
      best = AvailableMemory{*bytes, "MemAvailable"};
  const std::optional<std::string> groups = read_text(proc + "/self/cgroup");
  if (!groups) return best;
  // Lines "<id>:<controllers>:<path>": "0::<path>" is the v2 group, a v1 line lists "memory" among its controllers.
  std::size_t at = 0;
  while (at < groups->size()) {
    std::size_t end = groups->find('\n', at);
    if (end == std::string::npos) end = groups->size();
    const std::string line = groups->substr(at, end - at);
    at = end + 1;
    const std::size_t first = line.find(':'), second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    const bool v2 = line.substr(0, first) == "0" && controllers.empty();
    bool memory_v1 = false;
    for (std::size_t c = 0; c <= controllers.size();) {
      std::size_t comma = controllers.find(',', c);
      if (comma == std::string::npos) comma = controllers.size();
      memory_v1 = memory_v1 || controllers.substr(c, comma - c) == "memory";
      c = comma + 1;
    }
    if ((!v2 && !memory_v1) || path.empty() || path.front() != '/' || path.find("/..") != std::string::npos) continue;
    const std::string mount = cgroup_root + (v2 ? "" : "/memory");
    // The group and every group above it: a job's limit often sits on a parent of the step's or task's group.
    while (true) {
      if (const std::optional<Room> room = cgroup_room(mount + (path == "/" ? "" : path), v2))
        if (!best || room->bytes < best->bytes)
          best = AvailableMemory{room->bytes, "memory cgroup " + path + " (limit " + format_bytes(room->limit) + ")"};
      if (path == "/") break;
      const std::size_t slash = path.find_last_of('/');
      path = slash == 0 ? "/" : path.substr(0, slash);
    }
  }
  return best;
}

MemoryLimitSetting parse_memory_limit(std::string_view what, std::string_view value) {
  if (value == "auto") return {};
  if (value == "off") return {MemoryLimitSetting::Kind::Off, 0};
  const auto refuse = [&] {
    return UsageError(std::string(what) + " must be auto, off or a size per rank with a unit (K, M, G, T: powers of " +
                      "1024), such as 16G or 512M, not '" + std::string(value) + "'");
  };
  std::string_view number = value, unit;
  const std::size_t digits_end = value.find_first_not_of("0123456789.");
  if (digits_end != std::string_view::npos) number = value.substr(0, digits_end), unit = value.substr(digits_end);
  if (unit == "iB" || unit.empty()) throw refuse();
  const std::string_view units = "KMGT";
  const std::size_t power = units.find(static_cast<char>(unit.front() & ~0x20));  // K or k
  const std::string_view rest = unit.substr(1);
  if (power == std::string_view::npos || !(rest.empty() || rest == "B" || rest == "iB")) throw refuse();
  const std::size_t dot = number.find('.');
  if (number.empty() || number.front() == '.' || number.back() == '.' ||
      (dot != std::string_view::npos && number.find('.', dot + 1) != std::string_view::npos) || number.size() > 24)
    throw refuse();
  const double scaled = std::stod(std::string(number)) * std::pow(1024.0, static_cast<double>(power + 1));
  if (!(scaled >= 1.0) || scaled >= 9.0e18) throw refuse();  // nothing, or more than 8 EiB
  return {MemoryLimitSetting::Kind::Bytes, static_cast<std::uint64_t>(scaled)};
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  double value = static_cast<double>(bytes) / 1024;
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits))
    value /= 1024, ++unit;
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  return text;
}

}  // namespace tenax::detail
