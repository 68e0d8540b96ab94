// Slurm hostlist expressions (SLURM_STEP_NODELIST, SLURM_JOB_NODELIST, topology.conf's Nodes= and Switches=): tenax's
// check in front of libslurm, the expansion, its measure, the round trip through compress_hostlist, and the names
// against libslurm's expansion of the whole expression in one hostlist.
#include <slurm/slurm.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tenax/error.hpp"
#include "tenax/hostlist.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view expression(reinterpret_cast<const char*>(data), size);
  tenax::HostlistSize measured;
  try {
    measured = tenax::measure_hostlist(expression);
  } catch (const tenax::UsageError&) {
    return 0;  // malformed, over the caps, or refused by Slurm's parser
  }
  if (measured.hosts > tenax::kMaxHostlistHosts || measured.chars > tenax::kMaxHostlistChars) __builtin_trap();
  // Larger expansions cost libslurm one allocation per name, which is slow under the sanitizers; the unit tests expand
  // lists up to the caps. Below this bound the fuzzer spends its time on parsing.
  if (measured.hosts > (std::size_t{1} << 16)) return 0;
  // expand_hostlist agrees: same refusals (none) and the measure is exact.
  const std::vector<std::string> hosts = tenax::expand_hostlist(expression);
  std::size_t chars = 0;
  for (const std::string& host : hosts)
    chars += host.size();
  if (measured.hosts != hosts.size() || measured.chars != chars) __builtin_trap();
  if (hosts.size() <= 4096 && !hosts.empty()) {
    // What passed the check is safe for libslurm in one piece too, and gives the same names in the same order.
    const std::string text(expression);
    hostlist_t hl = slurm_hostlist_create(text.c_str());
    if (hl == nullptr) __builtin_trap();
    for (const std::string& host : hosts) {
      char* name = slurm_hostlist_shift(hl);
      if (name == nullptr || host != name) __builtin_trap();
      std::free(name);
    }
    if (slurm_hostlist_count(hl) != 0) __builtin_trap();
    slurm_hostlist_destroy(hl);
    // Every expanded name is one compress_hostlist accepts, and the round trip gives the same list back.
    if (tenax::expand_hostlist(tenax::compress_hostlist(hosts)) != hosts) __builtin_trap();
  }
  return 0;
}
