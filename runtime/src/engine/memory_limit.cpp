#include "engine/memory_limit.hpp"

#include <atomic>
#include <limits>

#include "comm/agreement.hpp"
#include "core/host_name.hpp"
#include "tenax/env.hpp"
#include "tenax/log.hpp"

namespace tenax::detail {
namespace {

constexpr std::uint64_t kNoFigure = std::numeric_limits<std::uint64_t>::max();
enum Word { kNodeTotal = 0, kNodeAllowance = 1 };

}  // namespace

ModelMemoryLimit::ModelMemoryLimit(Communicator& world, std::function<std::string()> where) {
  MemoryLimitSetting setting;
  run_agreed(world, [&] { setting = parse_memory_limit("TENAX_MEMORY_LIMIT", env::get_string("TENAX_MEMORY_LIMIT")); });
  // Made on every rank whatever its setting: the ranks' settings may differ, the collective may not.
  node_ = std::make_unique<NodeSharedWords>(world);
  if (node_->node_rank() == 0) {
    const std::optional<AvailableMemory> available = available_host_memory();
    std::atomic_ref<std::uint64_t>(*node_->word(kNodeAllowance))
        .store(available ? available->bytes / 8 * 7 : kNoFigure);
    if (available)
      TENAX_LOG(Debug, "engine") << "host memory of node " << node_name() << ": " << format_bytes(available->bytes)
                                 << " available (" << available->source << ")";
  }
  node_->ready();
  if (setting.kind == MemoryLimitSetting::Kind::Off) return;
  if (setting.kind == MemoryLimitSetting::Kind::Bytes) {
    // What this process already holds (another model's buffers) is not the new model's: the size comes on top.
    const std::uint64_t held = charged_host_memory();
    const std::string value = env::get_string("TENAX_MEMORY_LIMIT");
    limit_ = std::make_unique<HostMemoryLimit>(
        held + setting.bytes, [where, held, value](std::uint64_t charged, std::uint64_t asked, std::uint64_t most) {
          return "engine: the model does not fit in the host memory of " + where() + ": its tensors and checkpoint " +
                 "staging memory take " + format_bytes(charged - std::min(charged, held)) + " so far and ask for " +
                 format_bytes(asked) + " more, over the " + format_bytes(most - held) +
                 " this rank may use (TENAX_MEMORY_LIMIT=" + value + "). " + kModelTooLargeFix;
        });
    return;
  }
  const std::uint64_t allowance = std::atomic_ref<std::uint64_t>(*node_->word(kNodeAllowance)).load();
  if (allowance == kNoFigure) {
    TENAX_LOG(Debug, "engine") << "no host memory limit: neither /proc/meminfo nor a memory cgroup could be read";
    return;
  }
  const int ranks = node_->node_ranks();
  TENAX_LOG(Debug, "engine") << "host memory for the model on this node's " << ranks << " rank(s): at most "
                             << format_bytes(allowance) << " together";
  limit_ = std::make_unique<HostMemoryLimit>(
      allowance,
      [where, ranks, node = node_name()](std::uint64_t charged, std::uint64_t asked, std::uint64_t most) {
        return "engine: the model does not fit in the host memory of node " + node + ": the tensors and checkpoint " +
               "staging memory of its " + std::to_string(ranks) + " rank(s) take " + format_bytes(charged) +
               " so far, and " + where() + " asks for " + format_bytes(asked) + " more, over the " +
               format_bytes(most) + " they may use together (7/8 of what the node has available: MemAvailable, or " +
               "less where the job's memory cgroup leaves less; TENAX_MEMORY_LIMIT sets a size per rank instead, " +
               "or off). " + kModelTooLargeFix;
      },
      node_->word(kNodeTotal));
}

void ModelMemoryLimit::lift() {
  limit_.reset();
  node_->release();
}

}  // namespace tenax::detail
