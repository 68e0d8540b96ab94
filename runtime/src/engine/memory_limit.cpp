#include "engine/memory_limit.hpp"

#include <algorithm>

#include "tenax/env.hpp"
#include "tenax/log.hpp"

namespace tenax::detail {

std::unique_ptr<HostMemoryLimit> model_memory_limit(int node_ranks, std::function<std::string()> where) {
  const MemoryLimitSetting setting = parse_memory_limit("TENAX_MEMORY_LIMIT", env::get_string("TENAX_MEMORY_LIMIT"));
  if (setting.kind == MemoryLimitSetting::Kind::Off) return nullptr;
  std::string share;  // how the allowance came about, for the error
  std::uint64_t allowance = setting.bytes;
  if (setting.kind == MemoryLimitSetting::Kind::Auto) {
    const std::optional<AvailableMemory> available = available_host_memory();
    if (!available) {
      TENAX_LOG(Debug, "engine") << "no host memory limit: neither /proc/meminfo nor a memory cgroup could be read";
      return nullptr;
    }
    const std::uint64_t ranks = static_cast<std::uint64_t>(std::max(1, node_ranks));
    // 7/8 of the rank's share: the rest is left to what is not counted here (the data loader's batches, MPI's and
    // the kernels' scratch memory, the program's own).
    allowance = available->bytes / ranks / 8 * 7;
    share = "7/8 of the " + format_bytes(available->bytes) + " available on this node (" + available->source + ")" +
            (ranks > 1 ? " shared by its " + std::to_string(ranks) + " ranks" : std::string(" for its one rank")) +
            "; TENAX_MEMORY_LIMIT sets the share per rank, or off";
  } else {
    share = "TENAX_MEMORY_LIMIT=" + env::get_string("TENAX_MEMORY_LIMIT");
  }
  // What this process already holds (another model's buffers) is not the new model's: the allowance comes on top.
  const std::uint64_t held = charged_host_memory();
  TENAX_LOG(Debug, "engine") << "host memory for the model on this rank: at most " << format_bytes(allowance) << " ("
                             << share << ")";
  return std::make_unique<HostMemoryLimit>(
      held + allowance,
      [where = std::move(where), share, held, allowance](std::uint64_t charged, std::uint64_t asked, std::uint64_t) {
        return "engine: the model does not fit in the host memory of " + where() + ": its tensors and checkpoint " +
               "staging memory take " + format_bytes(charged - std::min(charged, held)) + " so far and ask for " +
               format_bytes(asked) + " more, over the " + format_bytes(allowance) + " this rank may use (" + share +
               "). Make the model smaller (fewer layers, a smaller hidden size or vocabulary), or the micro-batch, " +
               "recompute activations, or spread the model over more ranks or nodes (tensor or pipeline parallelism; " +
               "ZeRO-1 shards the optimizer state over the data-parallel ranks)";
      });
}

}  // namespace tenax::detail
