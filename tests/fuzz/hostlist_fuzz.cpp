// Slurm hostlist expressions (SLURM_STEP_NODELIST, SLURM_JOB_NODELIST, topology.conf's Nodes= and Switches=): the
// expansion, its measure, and the round trip through compress_hostlist.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tenax/error.hpp"
#include "tenax/hostlist.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view expression(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> hosts;
  try {
    hosts = tenax::expand_hostlist(expression);
  } catch (const tenax::UsageError&) {
    return 0;  // malformed or over the caps: the parser's own refusal
  }
  // The measure is exact and within the caps.
  const tenax::HostlistSize measured = tenax::measure_hostlist(expression);
  std::size_t chars = 0;
  for (const std::string& host : hosts)
    chars += host.size();
  if (measured.hosts != hosts.size() || measured.chars != chars) __builtin_trap();
  if (hosts.size() > tenax::kMaxHostlistHosts || chars > tenax::kMaxHostlistChars) __builtin_trap();
  // Every expanded name is one compress_hostlist accepts, and the round trip gives the same list back (bounded so that
  // the fuzzer spends its time on parsing).
  if (hosts.size() <= 4096 && !hosts.empty()) {
    if (tenax::expand_hostlist(tenax::compress_hostlist(hosts)) != hosts) __builtin_trap();
  }
  return 0;
}
