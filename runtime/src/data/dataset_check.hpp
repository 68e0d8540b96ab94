// Internal: checks the files of a token dataset against its index by reading them (not mapping them: a truncated
// file must be an error message, never SIGBUS). Used by `tenax-data verify`, by staging (reused copies and the read
// back of new ones) and by the tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset_index.hpp"
#include "data/shard_format.hpp"

namespace tenax::data {

// What to do about a dataset whose files disagree with each other or with its index, appended to those messages.
inline constexpr const char* kMixedDatasetFix =
    ": the dataset is damaged or mixed from two datasets; check it with `tenax-data verify DIR` and re-create it "
    "with `tenax-data encode`";

// How a shard's header disagrees with its index entry (shard `number` of `split`): "its header says token count 5, the
// index says 6"; "" when they agree. A swapped, foreign or stale shard whose own header is intact.
std::string header_disagreement(const ShardHeader& h, const ShardEntry& entry, const DatasetIndex& index, SplitId split,
                                std::uint32_t number);
// The problem of a shard's header alone (the file opened, its header parsed and compared with the index), "" when none:
// the cheap check before reading some of its tokens (tenax-data decode). Reads 64 bytes.
std::string shard_header_problem(const std::string& path, const ShardEntry& entry, const DatasetIndex& index,
                                 SplitId split, std::uint32_t number);

// Problems of one file, empty when it is fine. `bytes_read` (not null) is increased by the bytes read.
// Shards: the header parses and agrees with the index entry (token count, checksum, vocabulary, split, number), the
// payload's CRC32C matches, and with check_ids every id is below the vocabulary size.
std::string shard_file_problem(const std::string& path, const ShardEntry& entry, const DatasetIndex& index,
                               SplitId split, std::uint32_t number, bool check_ids, std::uint64_t* bytes_read);
// The tokenizer model: the size and CRC32C the index records.
std::string tokenizer_file_problem(const std::string& path, const DatasetIndex& index, std::uint64_t* bytes_read);

// Every file the index lists under `dir` (tokenizer, then train and validation shards in order): one line per problem.
std::vector<std::string> dataset_problems(const std::string& dir, const DatasetIndex& index, bool check_ids,
                                          std::uint64_t* bytes_read);

// The files of a dataset, index.json last, with their sizes (computed from the index).
struct DatasetFile {
  std::string name;
  std::uint64_t bytes = 0;
};
std::vector<DatasetFile> dataset_files(const DatasetIndex& index, std::uint64_t index_bytes);

}  // namespace tenax::data
