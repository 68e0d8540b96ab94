// The SPANK plugin's admin configuration: the key=value arguments after the plugin's path in plugstack.conf, one per
// line of the input (Slurm splits the line on white space; any byte but NUL and white space can reach the plugin).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "admin_config.hpp"
#include "input_limits.hpp"
#include "tenax/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tenax::spank;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args;
  std::size_t start = 0;
  while (start < input.size()) {
    std::size_t end = input.find('\n', start);
    if (end == std::string_view::npos) end = input.size();
    args.emplace_back(input.substr(start, end - start));
    start = end + 1;
  }
  try {
    const AdminConfig config = AdminConfig::parse(args);
    if (config.default_restarts < 0 || config.default_restarts > config.max_restarts) __builtin_trap();
    if (config.max_spares < 0) __builtin_trap();
    for (const std::string* path :
         {&config.ckpt_root, &config.topology_file, &config.hw_topology, &config.ckpt_default}) {
      if (path->size() > kMaxPathLength || (!path->empty() && path->front() != '/')) __builtin_trap();
    }
    if (config.placement == PlacementPolicy::None && !config.allow_placement_none) __builtin_trap();
  } catch (const tenax::UsageError&) {
    // refused with a message naming the argument: the parser's own answer
  }
  return 0;
}
