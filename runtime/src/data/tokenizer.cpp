// Tokenizer over sentencepiece::SentencePieceProcessor. The model is read by tenax (size-bounded, checksummed for a
// dataset) and handed to the processor as bytes, so that every failure names the file.
#include "tenax/tokenizer.hpp"

#include <sentencepiece_processor.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/crc32c.hpp"
#include "core/file_system.hpp"
#include "data/dataset_index.hpp"
#include "data/text_cut.hpp"
#include "tenax/error.hpp"

namespace tenax {
namespace {

// SentencePiece models are a few MB at most; a larger file is not one.
constexpr std::uint64_t kMaxModelBytes = 1ull << 30;

std::string read_model(const std::string& path) {
  std::uint64_t size = 0;
  try {
    size = fs::file_size(path);
  } catch (const fs::FsError& e) {
    const std::string message = std::string("cannot read tokenizer model: ") + e.what();
    if (e.error_number() == ENOENT || e.error_number() == ENOTDIR) throw DataError(message);  // none there
    throw IoError(message);
  }
  if (size > kMaxModelBytes)
    throw DataError("tokenizer model " + path + " has " + std::to_string(size) +
                    " bytes; a SentencePiece model is far "
                    "smaller: is this the tokenizer.model written by tenax-data train-tokenizer?");
  return fs::read_file(path);
}

}  // namespace

struct Tokenizer::State {
  std::string path;
  sentencepiece::SentencePieceProcessor processor;
  // Whether encoding may cut a text after its newlines and concatenate the parts' ids (see encode): no piece holds a
  // newline and nothing is added at the start of a text (a dummy prefix would be, at every part).
  bool cuts_at_newlines = false;
};

namespace {

// SentencePiece needs on the order of 175 bytes of memory per byte of text it encodes at once: a 36 MB document took
// 6.3 GB. Longer texts are encoded in parts of at most this size, where the model allows it.
constexpr std::size_t kEncodePartBytes = 1 << 20;

bool model_cuts_at_newlines(const sentencepiece::SentencePieceProcessor& p) {
  for (int id = 0; id < p.GetPieceSize(); ++id)
    if (p.IdToPiece(id).find('\n') != std::string::npos) return false;
  // What else could make the parts differ from the whole: a dummy prefix, whitespace removed at a part's start, runs
  // of unknown characters (a newline without byte fallback) merged into one <unk>.
  for (const auto& [head, tail] :
       {std::pair<const char*, const char*>{"ab\n", "cd"}, {"ab\n", "  cd"}, {"a\n", "\nb"}, {" a \n", " \t b"}}) {
    std::vector<int> whole, first, second;
    if (!p.Encode(std::string(head) + tail, &whole).ok() || !p.Encode(head, &first).ok() ||
        !p.Encode(tail, &second).ok())
      return false;
    first.insert(first.end(), second.begin(), second.end());
    if (first != whole) return false;
  }
  return true;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}

Tokenizer::Tokenizer(const std::string& model_path) : Tokenizer(std::make_unique<State>()) {
  state_->path = model_path;
  const std::string bytes = read_model(model_path);
  const auto status = state_->processor.LoadFromSerializedProto(bytes);
  if (!status.ok() || state_->processor.GetPieceSize() <= 0)
    throw DataError("tokenizer model " + model_path + " is not a SentencePiece model (" + status.ToString() +
                    "): train one with `tenax-data train-tokenizer`");
  state_->cuts_at_newlines = model_cuts_at_newlines(state_->processor);
}

Tokenizer Tokenizer::for_dataset(const std::string& dataset_dir) {
  const data::DatasetIndex index = data::read_index(dataset_dir);
  const std::string path = dataset_dir + "/" + index.tokenizer_file;
  const std::string bytes = read_model(path);
  const std::uint32_t crc = ckpt::crc32c_extend(0, bytes.data(), bytes.size());
  if (bytes.size() != index.tokenizer_bytes || crc != index.tokenizer_crc32c) {
    char buf[160];
    std::snprintf(buf, sizeof buf, " has %zu bytes and CRC32C 0x%08x; the index records %llu bytes and 0x%08x",
                  bytes.size(), crc, static_cast<unsigned long long>(index.tokenizer_bytes), index.tokenizer_crc32c);
    throw DataError("tokenizer model " + path + buf +
                    ": the file is damaged or replaced; re-create the dataset with `tenax-data encode`");
  }
  Tokenizer t(path);
  if (t.vocab_size() != static_cast<std::int32_t>(index.vocab_size))
    throw DataError("tokenizer model " + path + " has " + std::to_string(t.vocab_size()) +
                    " pieces but the dataset's vocab_size is " + std::to_string(index.vocab_size));
  return t;
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

bool Tokenizer::encodes_in_parts() const {
  return state_->cuts_at_newlines;
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> out;
  std::vector<int> ids;
  while (!text.empty()) {
    // No piece spans a newline, so cut after one the ids of the parts are the ids of the whole. A line longer than a
    // part (minified code, a JSON dump, one article per line) is cut inside too, after whitespace where it has some:
    // whole, a 100 MB line would take SentencePiece about 17 GB per encoding thread. Its ids then differ from the
    // whole line's only next to the cut, and they still decode to the text (no character is split).
    std::size_t part = text.size();
    if (state_->cuts_at_newlines && text.size() > kEncodePartBytes) {
      const std::size_t newline = text.rfind('\n', kEncodePartBytes - 1);
      part = newline != std::string_view::npos ? newline + 1 : data::cut_point(text, kEncodePartBytes);
    }
    const auto status = state_->processor.Encode(text.substr(0, part), &ids);
    if (!status.ok()) throw IoError("tokenizer " + state_->path + ": encoding failed: " + status.ToString());
    out.insert(out.end(), ids.begin(), ids.end());
    text.remove_prefix(part);
  }
  return out;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
  const std::int32_t n = vocab_size();
  std::vector<int> v(ids.begin(), ids.end());
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] < 0 || v[i] >= n)
      throw UsageError("Tokenizer::decode: id " + std::to_string(v[i]) + " at position " + std::to_string(i) +
                       " is outside the vocabulary (size " + std::to_string(n) + ")");
  std::string text;
  const auto status = state_->processor.Decode(v, &text);
  if (!status.ok()) throw IoError("tokenizer " + state_->path + ": decoding failed: " + status.ToString());
  return text;
}

std::int32_t Tokenizer::vocab_size() const {
  return state_->processor.GetPieceSize();
}
std::int32_t Tokenizer::eos_id() const {
  return state_->processor.eos_id();
}
std::int32_t Tokenizer::bos_id() const {
  return state_->processor.bos_id();
}
std::int32_t Tokenizer::unk_id() const {
  return state_->processor.unk_id();
}

std::string Tokenizer::piece(std::int32_t id) const {
  if (id < 0 || id >= vocab_size())
    throw UsageError("Tokenizer::piece: id " + std::to_string(id) + " is outside the vocabulary (size " +
                     std::to_string(vocab_size()) + ")");
  return state_->processor.IdToPiece(id);
}

}  // namespace tenax
