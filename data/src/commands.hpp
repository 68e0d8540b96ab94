// tenax-data's commands as functions (main.cpp parses the command line into these; the tests call them directly).
// Each throws UsageError for bad arguments or inputs (exit 64) and IoError when reading or writing fails or a dataset
// is damaged (exit 1); messages name the file or option and the fix.
#pragma once

#include <cstdint>
#include <exception>
#include <iosfwd>
#include <string>
#include <vector>

namespace tenax::datatool {

inline constexpr int kExitDamaged = 1;  // verify found a problem, or an I/O error

// Ctrl-C (SIGINT), SIGTERM or SIGHUP during encode: it stops at its next batch and leaves nothing behind, instead of
// dying with a half-written output directory; main() then ends by the same signal. main() installs the handlers for
// encode only (train-tokenizer writes its model at the very end, the other commands write nothing); a second signal
// ends the process at once.
struct Interrupted : std::exception {
  int signal = 0;
  explicit Interrupted(int signo) : signal(signo) {}
  const char* what() const noexcept override { return "interrupted"; }
};
void install_interrupt_handlers();
void throw_if_interrupted();  // throws Interrupted once a signal arrived

// "tenax-data 0.1.0 (shard format 1, index version 1, SentencePiece 0.1.97)": prepare-corpus.sh's cache key includes
// it.
std::string version_text();

struct CorpusOptions {
  std::vector<std::string> inputs;  // files, or directories walked recursively (sorted, symlinks not followed)
  std::string extension;            // only files whose names end with this (e.g. ".txt"); empty: all files
};

struct TrainTokenizerOptions {
  CorpusOptions corpus;
  std::string output;  // the model file to create (must not exist)
  std::uint32_t vocab = 8192;
  std::uint64_t max_sentences = 2000000;  // lines sampled for training (SentencePiece's input_sentence_size)
  std::uint32_t seed = 1;                 // of that sampling
  int threads = 0;                        // 0: the machine's cores
};
struct TrainTokenizerResult {
  std::uint64_t sentences = 0;
  std::uint64_t split_lines = 0;  // lines longer than SentencePiece takes, fed in pieces
  std::uint64_t bytes = 0;
  std::uint32_t vocab = 0;
  double seconds = 0;
  std::uint64_t skipped_links = 0;  // symbolic links inside input directories, not followed
};
TrainTokenizerResult train_tokenizer(const TrainTokenizerOptions& options);

struct EncodeOptions {
  CorpusOptions corpus;
  std::string tokenizer;              // model file (from train-tokenizer)
  std::string output;                 // dataset directory to create (must not exist)
  double validation_fraction = 0.01;  // of the corpus's bytes, held out as whole documents
  std::uint64_t split_seed = 0;       // which documents are held out
  std::uint64_t shard_tokens = 1ull << 26;
  std::string label;  // free text stored in the index (prepare-corpus.sh stores its cache key)
  int threads = 0;    // 0: the machine's cores
};
struct EncodeResult {
  std::uint64_t documents = 0;
  std::uint64_t bytes = 0;
  std::uint64_t train_tokens = 0;
  std::uint64_t validation_tokens = 0;
  std::uint64_t train_documents = 0;
  std::uint64_t validation_documents = 0;
  std::size_t shards = 0;
  double seconds = 0;
  std::uint64_t skipped_links = 0;  // symbolic links inside input directories, not followed
  // Temporary folders of earlier encodes of this output on this host that were killed, removed ("<path> (pid N)").
  std::vector<std::string> removed_leftovers;
};
EncodeResult encode(const EncodeOptions& options);

// Checks the index and every file (checksums, headers, ids below the vocabulary) and, when `label` is not empty, that
// the index's label equals it. Writes one line per problem to `out`; returns the number of problems.
struct VerifyResult {
  std::size_t problems = 0;
  std::uint64_t bytes_read = 0;
  std::size_t files = 0;
};
VerifyResult verify(const std::string& dir, const std::string& label, std::ostream& out);

void info(const std::string& dir, std::ostream& out);

struct DecodeOptions {
  std::string dir;
  std::string split = "train";
  std::uint64_t offset = 0;  // first token of the split's stream
  std::uint64_t count = 256;
  std::vector<std::int32_t> ids;  // when not empty: decode these instead of a range of the dataset
};
void decode(const DecodeOptions& options, std::ostream& out);

}  // namespace tenax::datatool
