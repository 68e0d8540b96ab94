// Internal: the binary token shard (docs/data-format.md). One shard is a 64-byte header and a payload of little-endian
// unsigned token ids, 2 or 4 bytes each, starting at byte 64 (8-byte aligned, so the payload can be used in place from
// a memory map). Nothing follows the payload: a file of another size is damaged.
//
//   offset  size  field
//        0     8  magic "TNXTOKSH"
//        8     4  format version (1)
//       12     4  header size in bytes (64)
//       16     4  token width in bytes (2 when the vocabulary has <= 65536 ids, else 4)
//       20     4  vocabulary size
//       24     8  token count
//       32     8  payload offset (64)
//       40     4  CRC32C of the payload
//       44     4  split (0 train, 1 validation)
//       48     4  shard number within its split
//       52     8  reserved, zero
//       60     4  CRC32C of bytes 0..59
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tenax::data {

inline constexpr char kShardMagic[8] = {'T', 'N', 'X', 'T', 'O', 'K', 'S', 'H'};
inline constexpr std::uint32_t kShardVersion = 1;
inline constexpr std::uint32_t kShardHeaderBytes = 64;

enum class SplitId : std::uint32_t { Train = 0, Validation = 1 };

struct ShardHeader {
  std::uint32_t version = kShardVersion;
  std::uint32_t token_bytes = 2;
  std::uint32_t vocab_size = 0;
  std::uint64_t token_count = 0;
  std::uint64_t payload_offset = kShardHeaderBytes;
  std::uint32_t payload_crc32c = 0;
  SplitId split = SplitId::Train;
  std::uint32_t shard_number = 0;
};

// A checksum as people and messages read it: "0x%08x".
std::string hex32(std::uint32_t v);

// The width tokens of a vocabulary are stored with: 2 bytes up to 65536 ids, else 4.
std::uint32_t token_bytes_for_vocab(std::uint64_t vocab_size);

// The 64 header bytes of `h`, header checksum included.
std::string encode_shard_header(const ShardHeader& h);

// Reads and checks a header: magic, version, header checksum, token width against the vocabulary size, payload
// offset, and that header plus payload make exactly `file_size` bytes (computed with overflow checks). `size` is how
// many bytes `bytes` holds (the file's first bytes; fewer than 64 is a truncated file). Throws IoError naming
// `file` and what to do.
ShardHeader parse_shard_header(const void* bytes, std::size_t size, std::uint64_t file_size, const std::string& file);

// The file size a header describes (payload_offset + token_count * token_bytes); throws IoError on overflow.
std::uint64_t shard_file_bytes(const ShardHeader& h, const std::string& file);

}  // namespace tenax::data
