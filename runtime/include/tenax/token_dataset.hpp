// TokenDataset: fixed-length training samples from a token dataset written by `tenax-data encode`
// (format: docs/data-format.md).
//
// Who calls what, in which order:
//
//   // 1. Once per job, on every rank (collective over a host communicator; a no-op without TENAX_DATA_STAGE_DIR):
//   tenax::StagingResult staged = tenax::stage_dataset(runtime.world(), "/shared/datasets/pydoc");  // data_staging.hpp
//   // 2. On every rank (not collective): open the split(s) from the directory staging returned.
//   auto train = std::make_shared<const tenax::TokenDataset>(
//       staged.dir, tenax::TokenDatasetOptions{.split = tenax::Split::Train, .seq_len = 1024, .seed = 1234});
//   // 3. A DataLoader whose batch index is the optimizer step; resume by starting it at the resume step.
//   tenax::DataLoader loader({.batch_bytes = tenax::token_batch_bytes(*train, global_batch, dp_size),
//                             .first_index = resume_step},
//                            tenax::make_token_batch_producer(train, global_batch, dp_rank, dp_size));
//   // 4. Each step: batch.host holds global_batch / dp_size rows of seq_len + 1 int32 tokens, row-major.
//   //    inputs = row[0 .. seq_len), targets = row[1 .. seq_len] (the next token of each input).
//
// Samples: the split's shards, concatenated in index order, form one token stream of T tokens (documents end with the
// tokenizer's end-of-document id). Sample k (0 <= k < N, N = (T - 1) / seq_len) is the window of seq_len + 1 tokens
// starting at token k * seq_len; consecutive samples overlap by one token, so every token is a target exactly once.
//
// Order: global position p is served sample order(p): epoch e = p / N, and within an epoch a seeded pseudo-random
// permutation of [0, N) (a keyed Feistel network with cycle walking), different in every epoch. So positions
// [e*N, (e+1)*N) visit every sample exactly once. order(p) takes O(1) memory and O(1) expected time for any p, and
// fill() is a pure function of (dataset contents, seed, seq_len, shuffle, positions): how positions are split into
// calls, which thread calls, and how many ranks there are make no difference. That is what makes resume exact.
//
// Batches (make_token_batch_producer): with global batch G and data-parallel size D (G % D == 0, B = G / D), batch
// index i (the optimizer step) on data-parallel rank r holds positions [i*G + r*B, i*G + (r+1)*B). Every rank of one
// data-parallel replica (its tensor- and pipeline-parallel peers) passes the same dp_rank and gets the same rows.
// Changing D between runs with the same G keeps the global sample sequence: a resumed run with another layout sees
// the same samples at the same steps.
//
// Threads: every const member, fill() included, may be called concurrently (the DataLoader's workers do).
// Errors: IoError for a damaged or inconsistent dataset (naming the file and the fix); UsageError for bad options.
// A shard file truncated by someone else while it is mapped raises SIGBUS on access: datasets are read-only once
// written (stage them to local disk to protect a run from changes on the shared file system).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tenax/batch_source.hpp"
#include "tenax/data_loader.hpp"

namespace tenax {

enum class Split { Train, Validation };
std::string_view split_name(Split split);  // "train", "validation"

struct TokenDatasetOptions {
  Split split = Split::Train;
  std::uint32_t seq_len = 0;      // tokens of model input per sample (> 0); a sample holds seq_len + 1 tokens
  std::uint64_t seed = 0;         // keys the sample order
  bool shuffle = true;            // false: position p serves sample p % N (e.g. a validation pass in stream order)
  bool verify_checksums = false;  // check every shard's payload CRC32C while opening (reads the whole split once)
};

// What the dataset's index says (the same for every split).
struct TokenDatasetInfo {
  std::string dir;                 // the directory opened
  std::uint32_t vocab_size = 0;    // token ids are in [0, vocab_size)
  std::uint32_t token_bytes = 0;   // on disk: 2 or 4
  std::int64_t eos_id = -1;        // end-of-document id, -1 if none
  std::string tokenizer_path;      // <dir>/<tokenizer file>; tenax::Tokenizer loads it
  std::uint32_t index_crc32c = 0;  // the dataset's identity (staging keys its copies by it)
  std::uint64_t tokens = 0;        // T of the opened split
  // T of the validation split, whichever split is opened: 0 when the dataset has none (tenax-data encode
  // --validation-fraction 0), and a program then trains without a validation loss.
  std::uint64_t validation_tokens = 0;
  std::uint64_t documents = 0;
  std::size_t shards = 0;
};

// Served so far by fill() (all threads together): for throughput counters and benchmarks.
struct TokenDatasetCounters {
  std::uint64_t samples = 0;
  std::uint64_t tokens = 0;      // samples * (seq_len + 1)
  std::uint64_t bytes_read = 0;  // tokens * token_bytes, read from the shard maps
  std::uint64_t fill_calls = 0;
};

// A BatchSource: hand it to tenax::Engine (training or validation) as it is; the engine's positions are the ones
// described above (tenax/batch_source.hpp).
class TokenDataset : public BatchSource {
 public:
  // Opens `dir` (read-only): reads and validates index.json, memory-maps the split's shards and checks each header
  // against the index (and each payload's checksum with verify_checksums). Not collective.
  // Throws IoError (damaged, truncated or foreign files, naming the file) or UsageError (seq_len 0, or a split too
  // short for one sample).
  TokenDataset(const std::string& dir, TokenDatasetOptions options);
  ~TokenDataset() override;
  TokenDataset(const TokenDataset&) = delete;
  TokenDataset& operator=(const TokenDataset&) = delete;

  const TokenDatasetInfo& info() const;
  const TokenDatasetOptions& options() const;
  std::uint64_t num_samples() const;                      // N
  std::size_t sample_tokens() const;                      // seq_len + 1
  std::uint64_t sample_at(std::uint64_t position) const;  // the sample index served at a global position

  // Writes samples at positions [first_position, first_position + count) to out: count rows of seq_len + 1 int32
  // tokens. Throws UsageError if the positions overflow 64 bits, IoError if a shard holds an id outside the vocabulary
  // (damage the header checksums cannot see; verify_checksums or `tenax-data verify` find it up front).
  void fill(std::uint64_t first_position, std::size_t count, std::int32_t* out) const;
  // BatchSource: the same, for a caller that names the sequence length; UsageError unless it is options().seq_len.
  void fill(std::uint64_t first, std::size_t count, std::size_t seq_len, std::int32_t* out) const override;
  // BatchSource: "token dataset 0x<index crc32c> (<split> split)": the dataset's content, wherever it is staged.
  std::string identity() const override;
  // BatchSource: num_samples().
  std::uint64_t distinct_samples() const override { return num_samples(); }

  TokenDatasetCounters counters() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Bytes of one DataLoader batch: (global_batch / dp_size) * (seq_len + 1) * 4. Throws UsageError when global_batch
// is 0, dp_size < 1, global_batch % dp_size != 0, or the size overflows.
std::size_t token_batch_bytes(const TokenDataset& dataset, std::uint64_t global_batch, int dp_size);

// The first global position of batch `index` on data-parallel rank `dp_rank`: index * G + dp_rank * (G / dp_size).
// Throws UsageError for a negative index, a bad layout or overflow.
std::uint64_t token_batch_first_position(std::int64_t index, std::uint64_t global_batch, int dp_rank, int dp_size);

// A DataLoader producer filling batch `index` with positions [first, first + G / dp_size) (first as above). The
// producer keeps the dataset alive and checks that the slot has token_batch_bytes(...) bytes.
DataLoader::Producer make_token_batch_producer(std::shared_ptr<const TokenDataset> dataset, std::uint64_t global_batch,
                                               int dp_rank, int dp_size);

}  // namespace tenax
