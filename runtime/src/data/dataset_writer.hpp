// Internal: writes a token dataset directory (index.json, the tokenizer model, train-NNNNN.tok and
// validation-NNNNN.tok shards), as `tenax-data encode` and the tests do.
//
// Atomicity: everything is written into a fresh sibling directory "<output>.tmp-<host>-<pid>-<n>", fsynced, and
// renamed to <output> by commit(); a reader therefore sees no dataset or a complete one. An existing <output> is never
// touched (UsageError up front, IoError if it appears while writing). A writer destroyed without commit() removes its
// temporary directory; one killed outright cannot, and the next writer of <output> on that host removes it
// (abandoned_siblings.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/dataset_index.hpp"

namespace tenax::data {

class DatasetWriter {
 public:
  // shard_tokens: the most tokens per shard (> 0). eos_id: appended by end_document() (-1: nothing appended).
  // Throws UsageError when `output_dir` exists or its parent does not, or the arguments are out of range.
  DatasetWriter(const std::string& output_dir, std::uint32_t vocab_size, std::int64_t eos_id,
                std::uint64_t shard_tokens);
  ~DatasetWriter();
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  // Appends tokens to a split's stream. Throws UsageError for an id outside [0, vocab_size), naming it.
  void append(SplitId split, std::span<const std::int32_t> tokens);
  // Ends a document: appends eos_id (when >= 0) and counts the document.
  void end_document(SplitId split);
  // The tokenizer model's bytes, stored as tokenizer.model.
  void set_tokenizer(const std::string& model_bytes);
  void set_source(const SourceInfo& source);

  std::uint64_t tokens(SplitId split) const;
  const std::string& temp_dir() const;
  // The temporary directories of earlier writers of this output on this host that were killed, removed by the
  // constructor ("<path> (pid N)").
  const std::vector<std::string>& removed_leftovers() const;

  // Closes the last shards, writes the index, makes everything durable and renames the directory into place.
  DatasetIndex commit();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tenax::data
