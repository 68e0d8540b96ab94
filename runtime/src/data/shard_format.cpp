#include "data/shard_format.hpp"

#include <cstdio>
#include <cstring>

#include "checkpoint/crc32c.hpp"
#include "data/byte_order.hpp"
#include "tenax/error.hpp"

namespace tenax::data {
namespace {

constexpr std::size_t kHeaderCrcAt = 60;

[[noreturn]] void damaged(const std::string& file, const std::string& what) {
  throw DataError(
      "token shard " + file + ": " + what +
      "; the file is damaged or not a tenax token shard: check it with `tenax-data verify` and re-create the "
      "dataset with `tenax-data encode`");
}

}  // namespace

std::uint32_t token_bytes_for_vocab(std::uint64_t vocab_size) {
  return vocab_size <= 65536 ? 2 : 4;
}

std::string encode_shard_header(const ShardHeader& h) {
  std::string out(kShardHeaderBytes, '\0');
  auto* p = reinterpret_cast<unsigned char*>(out.data());
  std::memcpy(p, kShardMagic, sizeof kShardMagic);
  store_le32(p + 8, h.version);
  store_le32(p + 12, kShardHeaderBytes);
  store_le32(p + 16, h.token_bytes);
  store_le32(p + 20, h.vocab_size);
  store_le64(p + 24, h.token_count);
  store_le64(p + 32, h.payload_offset);
  store_le32(p + 40, h.payload_crc32c);
  store_le32(p + 44, static_cast<std::uint32_t>(h.split));
  store_le32(p + 48, h.shard_number);
  store_le32(p + kHeaderCrcAt, ckpt::crc32c_extend(0, p, kHeaderCrcAt));
  return out;
}

std::uint64_t shard_file_bytes(const ShardHeader& h, const std::string& file) {
  std::uint64_t payload = 0, total = 0;
  if (__builtin_mul_overflow(h.token_count, std::uint64_t{h.token_bytes}, &payload) ||
      __builtin_add_overflow(h.payload_offset, payload, &total))
    damaged(file, "token count " + std::to_string(h.token_count) + " x " + std::to_string(h.token_bytes) +
                      " bytes overflows a 64-bit file size");
  return total;
}

ShardHeader parse_shard_header(const void* bytes, std::size_t size, std::uint64_t file_size, const std::string& file) {
  if (size < kShardHeaderBytes || file_size < kShardHeaderBytes)
    damaged(file, "it has " + std::to_string(file_size) + " bytes, fewer than the " +
                      std::to_string(kShardHeaderBytes) + "-byte header (truncated)");
  const auto* p = static_cast<const unsigned char*>(bytes);
  if (std::memcmp(p, kShardMagic, sizeof kShardMagic) != 0) damaged(file, "it does not start with \"TNXTOKSH\"");
  ShardHeader h;
  h.version = load_le32(p + 8);
  if (h.version != kShardVersion)
    throw DataError("token shard " + file + " has format version " + std::to_string(h.version) +
                    "; this tenax reads version " + std::to_string(kShardVersion) +
                    ": re-create the dataset with this tenax's `tenax-data encode`");
  const std::uint32_t want_crc = load_le32(p + kHeaderCrcAt);
  const std::uint32_t got_crc = ckpt::crc32c_extend(0, p, kHeaderCrcAt);
  if (want_crc != got_crc)
    damaged(file, "header checksum mismatch (recorded " + hex32(want_crc) + ", computed " + hex32(got_crc) + ")");
  const std::uint32_t header_bytes = load_le32(p + 12);
  if (header_bytes != kShardHeaderBytes)
    damaged(file, "header size " + std::to_string(header_bytes) + " is not " + std::to_string(kShardHeaderBytes));
  h.token_bytes = load_le32(p + 16);
  h.vocab_size = load_le32(p + 20);
  h.token_count = load_le64(p + 24);
  h.payload_offset = load_le64(p + 32);
  h.payload_crc32c = load_le32(p + 40);
  const std::uint32_t split = load_le32(p + 44);
  h.shard_number = load_le32(p + 48);
  if (h.vocab_size == 0 || h.vocab_size > 0x7fffffffu)
    damaged(file, "vocabulary size " + std::to_string(h.vocab_size) + " is outside 1..2147483647");
  if (h.token_bytes != token_bytes_for_vocab(h.vocab_size))
    damaged(file, "token width " + std::to_string(h.token_bytes) + " bytes does not match vocabulary size " +
                      std::to_string(h.vocab_size) + " (2 bytes up to 65536 ids, else 4)");
  if (h.payload_offset != kShardHeaderBytes)
    damaged(file,
            "payload offset " + std::to_string(h.payload_offset) + " is not " + std::to_string(kShardHeaderBytes));
  if (split > 1) damaged(file, "split " + std::to_string(split) + " is neither 0 (train) nor 1 (validation)");
  h.split = static_cast<SplitId>(split);
  if (load_le64(p + 52) != 0) damaged(file, "reserved bytes 52..59 are not zero");
  const std::uint64_t want_size = shard_file_bytes(h, file);
  if (want_size != file_size)
    damaged(file, "it has " + std::to_string(file_size) + " bytes but its header describes " +
                      std::to_string(want_size) + " (" + std::to_string(h.token_count) + " tokens of " +
                      std::to_string(h.token_bytes) + " bytes after the header)" +
                      (file_size < want_size ? ": truncated" : ""));
  return h;
}

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace tenax::data
