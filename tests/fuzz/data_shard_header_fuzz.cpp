// Token shard headers are read from files that may be truncated, damaged or foreign: for any bytes taken as a whole
// shard file, parse_shard_header must return a header that describes exactly that file or throw tenax::IoError naming
// the problem; never a crash, a sanitizer report or another exception. An accepted header is encoded again and must
// give back the same 64 bytes. Each input is also tried with its header checksum recomputed, so that the checks
// behind it are fuzzed too (random bytes almost never match a CRC32C).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "checkpoint/crc32c.hpp"
#include "data/byte_order.hpp"
#include "data/shard_format.hpp"
#include "tenax/error.hpp"

namespace {

void check(const std::uint8_t* data, std::size_t size) {
  tenax::data::ShardHeader h;
  try {
    h = tenax::data::parse_shard_header(data, size, size, "fuzz.tok");
  } catch (const tenax::IoError&) {
    return;
  }
  if (size < tenax::data::kShardHeaderBytes) std::abort();
  if (tenax::data::shard_file_bytes(h, "fuzz.tok") != size) std::abort();
  if (h.token_bytes != 2 && h.token_bytes != 4) std::abort();
  const std::string again = tenax::data::encode_shard_header(h);
  if (std::memcmp(again.data(), data, tenax::data::kShardHeaderBytes) != 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check(data, size);
  if (size >= tenax::data::kShardHeaderBytes) {
    std::string sealed(reinterpret_cast<const char*>(data), size);
    auto* p = reinterpret_cast<unsigned char*>(sealed.data());
    tenax::data::store_le32(p + 60, tenax::ckpt::crc32c_extend(0, p, 60));
    check(p, size);
  }
  return 0;
}
