// Checkpoint manifests (manifest.json) are read from storage that may be damaged or written by someone else: parsing
// and validating any bytes must end in a manifest or a std::runtime_error naming the problem, never a crash, a
// sanitizer report, an unbounded allocation or another exception. A manifest that passes is written back and must
// read back the same (the checksum the writer adds must verify).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "checkpoint/manifest.hpp"

namespace {

bool same(const tenax::ckpt::Manifest& a, const tenax::ckpt::Manifest& b) {
  if (a.step != b.step || a.world_size != b.world_size || a.files.size() != b.files.size() ||
      a.tensors.size() != b.tensors.size() || a.blobs.size() != b.blobs.size())
    return false;
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& x = a.tensors[i];
    const auto& y = b.tensors[i];
    if (x.name != y.name || x.dtype != y.dtype || x.global_shape != y.global_shape || x.blocks.size() != y.blocks.size())
      return false;
    for (std::size_t j = 0; j < x.blocks.size(); ++j)
      if (x.blocks[j].rank != y.blocks[j].rank || x.blocks[j].dataset != y.blocks[j].dataset ||
          !(x.blocks[j].box == y.blocks[j].box) || x.blocks[j].crc32c != y.blocks[j].crc32c)
        return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  tenax::ckpt::Manifest m;
  try {
    m = tenax::ckpt::Manifest::from_json(text);
  } catch (const std::runtime_error&) {
    return 0;  // refused, with a message: what must happen to damaged input
  }
  const std::string again = m.to_json();
  const tenax::ckpt::Manifest back = tenax::ckpt::Manifest::from_json(again);  // must not throw
  if (!same(m, back)) std::abort();
  return 0;
}
