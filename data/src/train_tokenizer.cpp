// train-tokenizer: a SentencePiece BPE model trained on the corpus's lines through the trainer's C++ API.
//
// The settings make the tokenizer lossless on any UTF-8 text, which is what a language model's data needs: no
// normalisation (identity), whitespace kept as it is (no collapsing, no dummy prefix), and byte fallback, so a
// character outside the vocabulary becomes its UTF-8 bytes instead of <unk>, and "\n" (never inside a training
// line) becomes the byte piece <0x0A>. Digits are split one per piece (a common choice for code and numbers).
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <regex>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "commands.hpp"
#include "core/file_system.hpp"
#include "corpus.hpp"
#include "data/text_cut.hpp"
#include "tenax/error.hpp"

// Declared in SentencePiece's logging header, which Debian does not install; exported by libsentencepiece.
namespace sentencepiece::logging {
void SetMinLogLevel(int v);
}

namespace tenax::datatool {
namespace {

// SentencePiece's longest training sentence in bytes (max_sentence_length): it drops longer ones silently.
constexpr std::size_t kMaxSentenceBytes = 16384;

// Feeds the non-empty lines of every document, reading one document at a time. A line longer than SentencePiece
// takes (one-article-per-line corpora, minified code) is fed in pieces of at most kMaxSentenceBytes, cut at
// whitespace where there is some: dropped, it would leave the tokenizer trained on the short lines alone.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<Document>& docs) : docs_(docs) { advance(); }
  bool done() const override { return done_; }
  void Next() override { advance(); }
  const std::string& value() const override { return piece_; }
  // A failure to read a document ends the iteration with an error status (no exception crosses SentencePiece's
  // frames); train_tokenizer rethrows it.
  sentencepiece::util::Status status() const override {
    if (error_) return sentencepiece::util::Status(sentencepiece::util::StatusCode::kInternal, "reading the corpus");
    return {};
  }
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }
  std::uint64_t lines() const { return lines_; }
  std::uint64_t bytes() const { return bytes_; }
  std::uint64_t split_lines() const { return split_lines_; }

 private:
  void advance() {
    if (piece_end_ < line_.size()) {  // the rest of a long line
      next_piece();
      return;
    }
    while (true) {
      if (pos_ >= text_.size()) {
        if (next_doc_ >= docs_.size()) {
          done_ = true;
          return;
        }
        try {
          text_ = read_document(docs_[next_doc_++]);
        } catch (...) {
          error_ = std::current_exception();
          done_ = true;
          return;
        }
        bytes_ += text_.size();
        pos_ = 0;
        continue;
      }
      std::size_t end = text_.find('\n', pos_);
      if (end == std::string::npos) end = text_.size();
      std::size_t stop = end;
      if (stop > pos_ && text_[stop - 1] == '\r') --stop;
      line_.assign(text_, pos_, stop - pos_);
      pos_ = end + 1;
      if (!line_.empty()) {
        ++lines_;
        if (line_.size() > kMaxSentenceBytes) ++split_lines_;
        piece_end_ = 0;
        next_piece();
        return;
      }
    }
  }
  void next_piece() {
    const std::size_t from = piece_end_;
    const std::string_view rest = std::string_view(line_).substr(from);
    piece_end_ = from + (rest.size() <= kMaxSentenceBytes ? rest.size() : data::cut_point(rest, kMaxSentenceBytes));
    piece_.assign(line_, from, piece_end_ - from);
  }

  const std::vector<Document>& docs_;
  std::size_t next_doc_ = 0;
  std::string text_;
  std::size_t pos_ = 0;
  std::string line_;
  std::size_t piece_end_ = 0;  // line_[0, piece_end_) was fed
  std::string piece_;
  bool done_ = false;
  std::uint64_t lines_ = 0;
  std::uint64_t bytes_ = 0;
  std::uint64_t split_lines_ = 0;
  std::exception_ptr error_;
};

// SentencePiece reports a vocabulary that does not fit the corpus in its own words; say it in tenax-data's options.
[[noreturn]] void explain_failure(const std::string& message, std::uint32_t vocab) {
  std::smatch m;
  static const std::regex too_high(R"(Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+))");
  static const std::regex too_small(R"(Vocabulary size is smaller than required_chars\. (\d+) vs (\d+))");
  if (std::regex_search(message, m, too_high))
    throw UsageError("--vocab " + std::to_string(vocab) + " is too large for this corpus: BPE finds only " +
                     m[2].str() + " pieces in it; use --vocab " + m[2].str() + " or less, or train on more text");
  if (std::regex_search(message, m, too_small))
    throw UsageError("--vocab " + std::to_string(vocab) + " is too small: this corpus needs at least " + m[2].str() +
                     " pieces (its characters, the 256 byte pieces and <unk> <s> </s>); use --vocab " + m[2].str() +
                     " or more");
  throw IoError("SentencePiece training failed: " + message);
}

}  // namespace

TrainTokenizerResult train_tokenizer(const TrainTokenizerOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.output.empty()) throw UsageError("--output is missing: name the model file to create (e.g. tokenizer.model)");
  if (fs::exists(o.output))
    throw UsageError("--output " + o.output +
                     " already exists; tenax-data never overwrites a model: remove it or "
                     "name a new file");
  if (o.vocab < 16 || o.vocab > (1u << 22))
    throw UsageError("--vocab " + std::to_string(o.vocab) + " is outside 16..4194304");
  if (const std::string parent = fs::parent_of(o.output); !fs::is_directory(parent))
    throw UsageError("--output " + o.output + ": its parent " + parent +
                     (fs::exists(parent) ? " is not a directory" : " does not exist: create it first"));
  const Corpus corpus = collect_documents(o.corpus);
  const std::vector<Document>& docs = corpus.documents;
  {
    // An empty corpus is reported as such, not as SentencePiece's complaint about an empty vocabulary.
    LineIterator probe(docs);
    probe.rethrow();
    if (probe.done())
      throw UsageError("the corpus has no text (" + std::to_string(docs.size()) +
                       " input files, all empty or blank): name inputs that hold text");
  }
  // SentencePiece trains on at most 128 threads (a larger count fails its own check).
  const int threads =
      o.threads > 0 ? o.threads : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 128u));
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(o.vocab)},
      {"byte_fallback", "true"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"split_digits", "true"},
      {"allow_whitespace_only_pieces", "true"},
      {"character_coverage", "0.9995"},
      {"max_sentence_length", std::to_string(kMaxSentenceBytes)},
      {"input_sentence_size", std::to_string(o.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(threads)},
  };
  sentencepiece::logging::SetMinLogLevel(2);  // errors only: tenax-data reports failures itself
  sentencepiece::SetRandomGeneratorSeed(o.seed);
  LineIterator lines(docs);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines, &model);
  lines.rethrow();
  if (!status.ok()) explain_failure(status.message(), o.vocab);
  sentencepiece::SentencePieceProcessor check;
  if (!check.LoadFromSerializedProto(model).ok() || check.GetPieceSize() != static_cast<int>(o.vocab))
    throw IoError("SentencePiece returned a model that does not load back with " + std::to_string(o.vocab) + " pieces");

  const std::string tmp = o.output + ".tmp-" + std::to_string(::getpid());
  try {
    fs::write_file_durable(tmp, model);
  } catch (const IoError&) {
    try {
      fs::remove_tree(tmp);  // a failed command leaves nothing behind (a full disk left a partial model here)
    } catch (const IoError&) {
    }
    throw;
  }
  if (!fs::rename_no_replace(tmp, o.output)) {
    fs::remove_tree(tmp);
    throw UsageError("--output " + o.output + " appeared while the model was trained; it was left alone");
  }
  fs::fsync_path(fs::parent_of(o.output));
  TrainTokenizerResult r;
  r.sentences = lines.lines();
  r.split_lines = lines.split_lines();
  r.bytes = lines.bytes();
  r.vocab = o.vocab;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.skipped_links = corpus.skipped_links;
  return r;
}

}  // namespace tenax::datatool
