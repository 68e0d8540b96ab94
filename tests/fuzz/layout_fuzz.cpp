// ParallelLayout::parse: "tp=2,pp=1,dp=2" or "2x1x2", from TENAX_LAYOUT and the launcher's --layout.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

#include "tenax/error.hpp"
#include "tenax/parallel_layout.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const tenax::ParallelLayout layout = tenax::ParallelLayout::parse(text);
    // A parsed layout has positive degrees whose product is an int (world_size() must not wrap), and round-trips.
    if (layout.tp < 1 || layout.pp < 1 || layout.dp < 1) __builtin_trap();
    std::int64_t world = 0;
    if (__builtin_mul_overflow(std::int64_t{layout.tp}, std::int64_t{layout.pp}, &world) ||
        __builtin_mul_overflow(world, std::int64_t{layout.dp}, &world) || world > std::numeric_limits<int>::max() ||
        world != layout.world_size())
      __builtin_trap();
    if (tenax::ParallelLayout::parse(layout.to_string()) != layout) __builtin_trap();
    layout.validate(layout.world_size());
  } catch (const tenax::UsageError&) {
    // malformed: the parser's own refusal
  }
  return 0;
}
