// Internal: index.json, the table of contents of a token dataset (docs/data-format.md). It lists each split's shards
// with their token counts and payload checksums, the tokenizer model file with its size and checksum, and the
// vocabulary; it ends with "index_crc32c", the CRC32C of every byte before that key's opening quote. That checksum
// identifies the dataset: node-local staging keys its copies by it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/shard_format.hpp"

namespace tenax::data {

inline constexpr const char* kIndexName = "index.json";
inline constexpr const char* kIndexFormat = "tenax-token-dataset";
inline constexpr std::uint64_t kIndexVersion = 1;
inline constexpr const char* kIndexChecksumKey = "index_crc32c";
// A larger file is not an index (a split's 32768 shards take about 3 MiB); refused before it is read into memory.
inline constexpr std::uint64_t kIndexMaxBytes = 64ull << 20;
// Each open shard is one memory map; a process may hold about 65530 (vm.max_map_count), and a training program opens
// both splits.
inline constexpr std::size_t kMaxShardsPerSplit = 32768;

// Tokens of one split at most: keeps every size computed from an index (4-byte tokens, the sum of both splits' files)
// far from 64-bit overflow.
inline constexpr std::uint64_t kMaxSplitTokens = 1ull << 60;

struct ShardEntry {
  std::string file;          // a plain name inside the dataset directory
  std::uint64_t tokens = 0;  // > 0
  std::uint32_t crc32c = 0;  // of the payload, as in the shard's header
};

struct SplitIndex {
  std::uint64_t documents = 0;
  std::uint64_t tokens = 0;  // the sum of the shards' tokens
  std::vector<ShardEntry> shards;
};

struct SourceInfo {  // how the dataset was made (for people and for prepare-corpus.sh's cache check)
  std::uint64_t documents = 0;
  std::uint64_t bytes = 0;
  double validation_fraction = 0;
  std::uint64_t split_seed = 0;
  std::string label;
};

struct DatasetIndex {
  std::uint32_t vocab_size = 0;
  std::uint32_t token_bytes = 2;
  std::int64_t eos_id = -1;  // the id appended after every document; -1: none
  std::string tokenizer_file;
  std::uint64_t tokenizer_bytes = 0;
  std::uint32_t tokenizer_crc32c = 0;
  SplitIndex train;
  SplitIndex validation;
  SourceInfo source;
  std::uint32_t index_crc32c = 0;  // filled by parse_index and serialize_index

  const SplitIndex& split(SplitId id) const { return id == SplitId::Train ? train : validation; }
};

std::string_view split_id_name(SplitId id);

// The index as JSON text, ending with its checksum (also stored in index.index_crc32c). Throws UsageError when the
// index breaks a rule parse_index enforces (a writer bug or bad arguments, caught before anything is written).
std::string serialize_index(DatasetIndex& index);

// Parses and validates index text read from `file` (named in errors): strict JSON, the checksum, the format and
// version, every field's type and range, plain and distinct file names, shard counts within kMaxShardsPerSplit,
// token sums without overflow. Throws IoError naming the file, the member and the fix.
DatasetIndex parse_index(std::string_view text, const std::string& file);

// Reads <dir>/index.json (at most kIndexMaxBytes) and parses it; the text is returned through `text` when not null.
DatasetIndex read_index(const std::string& dir, std::string* text = nullptr);

// Empty when `name` may name a file of a dataset (1..255 of [A-Za-z0-9._-], not starting with '.'), else why not.
std::string file_name_problem(std::string_view name);

}  // namespace tenax::data
