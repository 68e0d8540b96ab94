// tenax-launch judges restart progress by the names in the checkpoint directory (checkpoint_scan.hpp): any name must
// give -1 or the step it spells, exactly "step_" and decimal digits whose value (leading zeros aside) is the step.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "checkpoint_scan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view name(reinterpret_cast<const char*>(data), size);
  const std::int64_t step = tenax::launch::checkpoint_step_of(name);
  if (step < -1) std::abort();
  if (step == -1) return 0;
  if (!name.starts_with("step_")) std::abort();
  std::string_view digits = name.substr(5);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) std::abort();
  while (digits.size() > 1 && digits.front() == '0')
    digits.remove_prefix(1);
  if (digits != std::to_string(step)) std::abort();
  return 0;
}
