#include "data/dataset_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "checkpoint/crc32c.hpp"
#include "core/abandoned_siblings.hpp"
#include "core/file_system.hpp"
#include "core/host_name.hpp"
#include "core/unique_fd.hpp"
#include "data/byte_order.hpp"
#include "tenax/error.hpp"

namespace tenax::data {
namespace {

// One shard being written: a header placeholder, then the payload through a buffer; close() writes the real header
// (with the payload's checksum) over the placeholder and fsyncs. The file lives in the writer's temporary directory,
// which nobody reads before commit().
class OpenShard {
 public:
  OpenShard(std::string path, std::string name, SplitId split, std::uint32_t number, std::uint32_t vocab_size)
      : path_(std::move(path)), name_(std::move(name)) {
    header_.split = split;
    header_.shard_number = number;
    header_.vocab_size = vocab_size;
    header_.token_bytes = token_bytes_for_vocab(vocab_size);
    fd_.reset(fs::open_file(path_, O_WRONLY | O_CREAT | O_EXCL, 0644));
    fs::write_all(fd_.get(), std::string(kShardHeaderBytes, '\0'), path_);
    buffer_.reserve(kBufferBytes);
  }
  std::uint64_t tokens() const { return header_.token_count; }

  void append(std::span<const std::int32_t> tokens) {
    const std::size_t width = header_.token_bytes;
    while (!tokens.empty()) {
      const std::size_t n = std::min(tokens.size(), (kBufferBytes - buffer_.size()) / width);
      const std::size_t at = buffer_.size();
      buffer_.resize(at + n * width);
      unsigned char* p = buffer_.data() + at;
      for (std::size_t i = 0; i < n; ++i, p += width) {
        if (width == 2) {
          store_le16(p, static_cast<std::uint16_t>(tokens[i]));
        } else {
          store_le32(p, static_cast<std::uint32_t>(tokens[i]));
        }
      }
      header_.token_count += n;
      tokens = tokens.subspan(n);
      if (buffer_.size() + width > kBufferBytes) flush();
    }
  }

  ShardEntry close() {
    flush();
    const std::string header = encode_shard_header(header_);
    fs::pwrite_all(fd_.get(), header.data(), header.size(), 0, path_);
    fs::fsync_fd(fd_.get(), path_);
    if (::close(fd_.release()) != 0) fs::throw_errno("close", path_, errno);
    return ShardEntry{name_, header_.token_count, header_.payload_crc32c};
  }

 private:
  static constexpr std::size_t kBufferBytes = 1 << 20;

  void flush() {
    header_.payload_crc32c = ckpt::crc32c_extend(header_.payload_crc32c, buffer_.data(), buffer_.size());
    fs::write_all(fd_.get(), std::string_view(reinterpret_cast<const char*>(buffer_.data()), buffer_.size()), path_);
    buffer_.clear();
  }

  std::string path_;
  std::string name_;
  ShardHeader header_;
  UniqueFd fd_;
  std::vector<unsigned char> buffer_;
};

struct SplitState {
  SplitId id;
  SplitIndex index;
  std::unique_ptr<OpenShard> open;
};

}  // namespace

struct DatasetWriter::State {
  std::string output;
  std::string temp;
  UniqueFd temp_lock;  // marks `temp` as in use (abandoned_siblings.hpp) until the writer goes
  std::vector<std::string> removed_leftovers;
  std::uint32_t vocab_size = 0;
  std::int64_t eos_id = -1;
  std::uint64_t shard_tokens = 0;
  SplitState splits[2] = {{SplitId::Train, {}, nullptr}, {SplitId::Validation, {}, nullptr}};
  std::string tokenizer;
  bool has_tokenizer = false;
  SourceInfo source;
  bool committed = false;

  SplitState& split(SplitId id) { return splits[id == SplitId::Train ? 0 : 1]; }

  void append(SplitState& s, std::span<const std::int32_t> tokens) {
    while (!tokens.empty()) {
      if (!s.open) {
        const auto number = static_cast<std::uint32_t>(s.index.shards.size());
        if (number >= kMaxShardsPerSplit)
          throw UsageError("the " + std::string(split_id_name(s.id)) + " split would need more than " +
                           std::to_string(kMaxShardsPerSplit) + " shards: raise --shard-tokens (now " +
                           std::to_string(shard_tokens) + ")");
        char name[64];
        std::snprintf(name, sizeof name, "%s-%05u.tok", std::string(split_id_name(s.id)).c_str(), number);
        s.open = std::make_unique<OpenShard>(fs::join(temp, name), name, s.id, number, vocab_size);
      }
      const std::uint64_t room = shard_tokens - s.open->tokens();
      const std::size_t n = tokens.size() < room ? tokens.size() : static_cast<std::size_t>(room);
      s.open->append(tokens.first(n));
      s.index.tokens += n;
      tokens = tokens.subspan(n);
      if (s.open->tokens() == shard_tokens) close_shard(s);
    }
  }

  void close_shard(SplitState& s) {
    s.index.shards.push_back(s.open->close());
    s.open.reset();
  }
};

DatasetWriter::DatasetWriter(const std::string& output_dir, std::uint32_t vocab_size, std::int64_t eos_id,
                             std::uint64_t shard_tokens)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  if (output_dir.empty()) throw UsageError("the output directory is empty: name a directory that does not exist yet");
  s.output = output_dir;
  while (s.output.size() > 1 && s.output.back() == '/')
    s.output.pop_back();
  if (vocab_size == 0 || vocab_size > 0x7fffffffu)
    throw UsageError("vocabulary size " + std::to_string(vocab_size) + " is outside 1..2147483647");
  if (eos_id < -1 || eos_id >= static_cast<std::int64_t>(vocab_size))
    throw UsageError("end-of-document id " + std::to_string(eos_id) + " is not -1 or an id of the vocabulary");
  if (shard_tokens == 0) throw UsageError("--shard-tokens must be at least 1");
  s.vocab_size = vocab_size;
  s.eos_id = eos_id;
  s.shard_tokens = shard_tokens;
  struct stat st {};
  if (::lstat(s.output.c_str(), &st) == 0)
    throw UsageError("the output " + s.output +
                     " already exists; tenax-data never overwrites a dataset: remove it or name a new directory");
  const std::string parent = fs::parent_of(s.output);
  if (!fs::is_directory(parent))
    throw UsageError("the output's parent " + parent +
                     (fs::exists(parent) ? " is not a directory" : " does not exist: create it first"));
  const std::string host = detail::node_name();
  s.removed_leftovers = detail::remove_abandoned_siblings(s.output, "tmp", host);
  detail::SiblingDir temp;
  if (const int error = detail::make_sibling_dir(s.output, "tmp", host, temp); error != 0)
    fs::throw_errno("create directory", temp.path, error);
  s.temp = temp.path;
  s.temp_lock = std::move(temp.lock);
}

DatasetWriter::~DatasetWriter() {
  if (!state_ || state_->committed) return;
  for (SplitState& sp : state_->splits)
    sp.open.reset();
  try {
    fs::remove_tree(state_->temp);
  } catch (const std::exception&) {
    // Nothing to report to from a destructor; the name says what it is.
  }
}

void DatasetWriter::append(SplitId split, std::span<const std::int32_t> tokens) {
  State& s = *state_;
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || static_cast<std::uint32_t>(tokens[i]) >= s.vocab_size)
      throw UsageError("token id " + std::to_string(tokens[i]) + " is outside the vocabulary (size " +
                       std::to_string(s.vocab_size) + ")");
  s.append(s.split(split), tokens);
}

void DatasetWriter::end_document(SplitId split) {
  State& s = *state_;
  SplitState& sp = s.split(split);
  if (s.eos_id >= 0) {
    const std::int32_t eos = static_cast<std::int32_t>(s.eos_id);
    s.append(sp, std::span<const std::int32_t>(&eos, 1));
  }
  ++sp.index.documents;
}

void DatasetWriter::set_tokenizer(const std::string& model_bytes) {
  state_->tokenizer = model_bytes;
  state_->has_tokenizer = true;
}

void DatasetWriter::set_source(const SourceInfo& source) {
  state_->source = source;
}

std::uint64_t DatasetWriter::tokens(SplitId split) const {
  return state_->split(split).index.tokens;
}

const std::vector<std::string>& DatasetWriter::removed_leftovers() const {
  return state_->removed_leftovers;
}

const std::string& DatasetWriter::temp_dir() const {
  return state_->temp;
}

DatasetIndex DatasetWriter::commit() {
  State& s = *state_;
  if (s.committed) throw UsageError("DatasetWriter::commit called twice");
  if (!s.has_tokenizer) throw UsageError("DatasetWriter: no tokenizer model was set");
  for (SplitState& sp : s.splits)
    if (sp.open) s.close_shard(sp);
  if (s.split(SplitId::Train).index.tokens == 0)
    throw UsageError("the train split has no tokens: the corpus is empty or every document went to validation");

  DatasetIndex index;
  index.vocab_size = s.vocab_size;
  index.token_bytes = token_bytes_for_vocab(s.vocab_size);
  index.eos_id = s.eos_id;
  index.tokenizer_file = "tokenizer.model";
  index.tokenizer_bytes = s.tokenizer.size();
  index.tokenizer_crc32c = ckpt::crc32c_extend(0, s.tokenizer.data(), s.tokenizer.size());
  index.train = s.split(SplitId::Train).index;
  index.validation = s.split(SplitId::Validation).index;
  index.source = s.source;
  const std::string text = serialize_index(index);
  fs::write_file_durable(fs::join(s.temp, index.tokenizer_file), s.tokenizer);
  fs::write_file_durable(fs::join(s.temp, kIndexName), text);
  fs::fsync_path(s.temp);
  if (!fs::rename_no_replace(s.temp, s.output))
    throw IoError("the output " + s.output +
                  " appeared while the dataset was written; it was left alone and the new "
                  "dataset discarded: remove it or name a new directory");
  s.committed = true;
  fs::fsync_path(fs::parent_of(s.output));
  return index;
}

}  // namespace tenax::data
