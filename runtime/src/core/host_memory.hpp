// Internal: the host memory this process's large buffers take (host tensors, checkpoint staging), how much the node
// lets the process take, and a limit that turns a model too large for its node into an error naming the problem
// while the model is built, instead of the kernel's OOM killer ending the job (and perhaps its neighbours) after
// minutes of pre-touching pages. MPI-free: part of tenax_core.
//
// Who calls what: Tensor's host allocations and the checkpoint staging arenas charge every buffer before making it
// and release it when it is freed (from any thread). The engine puts a HostMemoryLimit in force while it builds a
// model (modules, parameter buffers, optimizer state, checkpoint staging); outside one, charges only count.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace tenax::detail {

// Bytes of host tensors and staging buffers alive in this process.
std::uint64_t charged_host_memory() noexcept;
// Charges `bytes` before they are allocated. While a HostMemoryLimit is in force and the charge would take the total
// above it, nothing is charged and UsageError (the limit's explanation) is thrown.
void charge_host_memory(std::uint64_t bytes);
void release_host_memory(std::uint64_t bytes) noexcept;

// While one lives, a charge that would take the process's total above `limit` bytes is refused with
// UsageError(explain(charged, asked, limit)). With `shared_total` (a word that other processes update too: the node's
// ranks' total, comm/node_shared_words.hpp) the limit applies to that total instead: every charge while the limit lives
// adds to it (atomically), and releases take back at most what this process added. One at a time per process: a
// second is a std::logic_error.
class HostMemoryLimit {
 public:
  using Explain = std::function<std::string(std::uint64_t charged, std::uint64_t asked, std::uint64_t limit)>;
  HostMemoryLimit(std::uint64_t limit, Explain explain, std::uint64_t* shared_total = nullptr);
  ~HostMemoryLimit();
  HostMemoryLimit(const HostMemoryLimit&) = delete;
  HostMemoryLimit& operator=(const HostMemoryLimit&) = delete;
};

// The memory the system lets this process take now: /proc/meminfo's MemAvailable, or less where a memory cgroup (a
// Slurm job's --mem, a container's limit) leaves less room: its limit minus what its processes hold apart from the
// reclaimable page cache (the kernel reclaims it before it kills; tmpfs and shared memory are held), the least over the
// process's cgroup and every group above it, cgroup v1 or v2. nullopt when none of it can be read. `source` names where
// the figure came from.
struct AvailableMemory {
  std::uint64_t bytes = 0;
  std::string source;  // "MemAvailable" or "memory cgroup <path> (limit <size>)"
};
std::optional<AvailableMemory> available_host_memory(const std::string& proc = "/proc",
                                                     const std::string& cgroup_root = "/sys/fs/cgroup");

// TENAX_MEMORY_LIMIT's value: auto (the node's available memory shared by its ranks), off, or a size per rank with a
// binary unit ("16G", "512M", "1.5T", "64GiB"). Throws UsageError naming `what` for anything else.
struct MemoryLimitSetting {
  enum class Kind { Auto, Off, Bytes };
  Kind kind = Kind::Auto;
  std::uint64_t bytes = 0;
};
MemoryLimitSetting parse_memory_limit(std::string_view what, std::string_view value);

// What to change when a model does not fit its memory (host or device), for the messages that say so.
inline constexpr const char* kModelTooLargeFix =
    "Make the model smaller (fewer layers, a smaller hidden size or vocabulary) or its micro-batch, store fewer "
    "activations (the GPT example's --recompute), or spread it over more nodes or GPUs (tensor or pipeline "
    "parallelism; ZeRO-1 shards the optimizer state over the data-parallel ranks)";
// An allocation outside the accounting failed (std::bad_alloc), for the messages that report it.
inline constexpr const char* kOutOfHostMemory =
    "out of host memory (std::bad_alloc): this rank could not allocate what it needed; run fewer ranks per node, a "
    "smaller model, batch or data buffers, or on nodes with more memory";

// "1.5 GiB", "12.0 MiB", "4.0 KiB", "512 bytes".
std::string format_bytes(std::uint64_t bytes);

}  // namespace tenax::detail
