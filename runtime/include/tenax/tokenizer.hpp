// Tokenizer: the SentencePiece model a token dataset was encoded with (tokenizer.model in the dataset directory,
// trained by `tenax-data train-tokenizer`). Turns text into token ids and back, e.g. to print what a trained model
// generates:
//
//   tenax::Tokenizer tok = tenax::Tokenizer::for_dataset(staged.dir);   // or Tokenizer(dataset.info().tokenizer_path)
//   std::vector<std::int32_t> prompt = tok.encode("def main(");
//   ... generate ids ...
//   std::cout << tok.decode(ids);
//
// The models tenax-data trains are lossless: decode(encode(text)) == text for any UTF-8 text (byte fallback, no
// normalisation). Control ids (end of document) decode to nothing.
// Threads: const members may be called from several threads at once.
// Errors: IoError when the model file is missing, unreadable, not a SentencePiece model or (for_dataset) does not
// match the dataset's recorded checksum; UsageError for ids outside the vocabulary.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tenax {

class Tokenizer {
 public:
  explicit Tokenizer(const std::string& model_path);
  // The tokenizer of the dataset in `dataset_dir`, checked against the size and CRC32C its index records.
  static Tokenizer for_dataset(const std::string& dataset_dir);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // The ids of `text`. SentencePiece needs ~175 bytes of memory per byte it encodes at once, so when the model allows
  // it (see encodes_in_parts) a text over 1 MiB is encoded in parts of at most 1 MiB: cut after newlines, with the ids
  // of the whole; a line longer than 1 MiB is cut inside too (after a space or tab where it has one, else between
  // characters), where its ids may differ from the whole line's next to the cut; for the lossless models tenax-data
  // trains, decode(encode(text)) == text either way.
  std::vector<std::int32_t> encode(std::string_view text) const;
  // Whether encode() may cut long texts into parts: no piece holds a newline, and encoding the parts of a few probes
  // gives the ids of the whole (no dummy prefix, no whitespace removal, newlines not folded into <unk>). True for the
  // models tenax-data trains.
  bool encodes_in_parts() const;
  std::string decode(std::span<const std::int32_t> ids) const;
  std::int32_t vocab_size() const;
  std::int32_t eos_id() const;  // -1 if the model has none
  std::int32_t bos_id() const;  // -1 if none
  std::int32_t unk_id() const;
  std::string piece(std::int32_t id) const;  // the id's vocabulary entry, e.g. "▁the"

 private:
  struct State;
  explicit Tokenizer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tenax
