// TokenDataset: the split's shards memory-mapped read-only, a prefix sum of their token counts to find the shard of a
// stream offset, and the sample order. Everything but the counters is immutable after construction, which is what
// lets fill() run on many threads at once.
#include "tenax/token_dataset.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "checkpoint/crc32c.hpp"
#include "core/unique_fd.hpp"
#include "data/byte_order.hpp"
#include "data/dataset_check.hpp"
#include "data/dataset_index.hpp"
#include "data/sample_order.hpp"
#include "data/shard_format.hpp"
#include "tenax/error.hpp"

namespace tenax {
namespace {

using data::DatasetIndex;
using data::ShardEntry;
using data::ShardHeader;
using data::SplitId;

// A read-only map of a whole file, unmapped on destruction (also when the owner's constructor throws after mapping).
struct Mapping {
  const unsigned char* base = nullptr;
  std::uint64_t size = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (base) ::munmap(const_cast<unsigned char*>(base), size);
  }
};

// One shard, mapped whole for the dataset's lifetime.
class MappedShard {
 public:
  MappedShard(const std::string& path, const ShardEntry& entry, const DatasetIndex& index, SplitId split,
              std::uint32_t number)
      : path_(path) {
    UniqueFd fd;
    do
      fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));  // a FIFO: refused below
    while (!fd.valid() && errno == EINTR);
    if (!fd.valid()) {
      const int err = errno;
      const std::string message = "cannot open token shard " + path + " (listed in the index): " + std::strerror(err) +
                                  (err == ENOENT ? std::string(data::kMixedDatasetFix) : std::string());
      if (err == ENOENT || err == ENOTDIR) throw DataError(message);  // the dataset lacks it
      throw IoError(message);
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
      throw DataError("token shard " + path + " is not a regular file" + data::kMixedDatasetFix);
    map_.size = static_cast<std::uint64_t>(st.st_size);
    if (map_.size > 0) {
      void* m = ::mmap(nullptr, map_.size, PROT_READ, MAP_SHARED, fd.get(), 0);
      if (m == MAP_FAILED) {
        const int err = errno;
        throw IoError("cannot memory-map token shard " + path + ": " + std::strerror(err) +
                      (err == ENOMEM ? " (too many maps? raise vm.max_map_count or use fewer, larger shards)" : ""));
      }
      map_.base = static_cast<const unsigned char*>(m);
    }
    fd.reset();  // the map keeps the file
    header_ = data::parse_shard_header(map_.base, static_cast<std::size_t>(std::min<std::uint64_t>(map_.size, 64)),
                                       map_.size, path);
    if (const std::string disagreement = data::header_disagreement(header_, entry, index, split, number);
        !disagreement.empty())
      throw DataError("token shard " + path + ": " + disagreement + data::kMixedDatasetFix);
  }
  MappedShard(const MappedShard&) = delete;
  MappedShard& operator=(const MappedShard&) = delete;

  const std::string& path() const { return path_; }
  std::uint64_t tokens() const { return header_.token_count; }
  const unsigned char* payload() const { return map_.base + header_.payload_offset; }

  void verify_payload() const {
    const std::uint64_t bytes = header_.token_count * header_.token_bytes;  // checked against the file size
    const std::uint32_t got = ckpt::crc32c_extend(0, payload(), bytes);
    if (got != header_.payload_crc32c)
      throw DataError("token shard " + path_ + ": payload checksum mismatch (recorded " +
                      data::hex32(header_.payload_crc32c) + ", computed " + data::hex32(got) + ")" +
                      data::kMixedDatasetFix);
  }

 private:
  std::string path_;
  Mapping map_;
  ShardHeader header_;
};

}  // namespace

std::string_view split_name(Split split) {
  return split == Split::Train ? "train" : "validation";
}

struct TokenDataset::State {
  TokenDatasetOptions options;
  TokenDatasetInfo info;
  std::vector<std::unique_ptr<MappedShard>> shards;
  std::vector<std::uint64_t> starts;  // stream offset of each shard's first token
  std::uint32_t width = 2;
  std::uint64_t samples = 0;
  std::unique_ptr<data::SampleOrder> order;

  mutable std::atomic<std::uint64_t> served_samples{0};
  mutable std::atomic<std::uint64_t> fill_calls{0};

  [[noreturn]] void bad_token(std::size_t shard, std::uint64_t offset, std::uint32_t id) const {
    throw DataError("token shard " + shards[shard]->path() + " holds id " + std::to_string(id) + " at token " +
                    std::to_string(offset) + ", outside the vocabulary (size " + std::to_string(info.vocab_size) + ")" +
                    data::kMixedDatasetFix);
  }

  // Copies stream tokens [begin, begin + n) to out, converting to int32 and checking each id.
  void copy_tokens(std::uint64_t begin, std::size_t n, std::int32_t* out) const {
    std::size_t s =
        static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin()) - 1;
    while (n > 0) {
      const MappedShard& shard = *shards[s];
      const std::uint64_t offset = begin - starts[s];
      const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(n, shard.tokens() - offset));
      const unsigned char* p = shard.payload() + offset * width;
      const std::uint32_t vocab = info.vocab_size;
      if (width == 2) {
        for (std::size_t i = 0; i < take; ++i) {
          const std::uint32_t id = data::load_le16(p + 2 * i);
          if (id >= vocab) bad_token(s, offset + i, id);
          out[i] = static_cast<std::int32_t>(id);
        }
      } else {
        for (std::size_t i = 0; i < take; ++i) {
          const std::uint32_t id = data::load_le32(p + 4 * i);
          if (id >= vocab) bad_token(s, offset + i, id);
          out[i] = static_cast<std::int32_t>(id);
        }
      }
      out += take;
      begin += take;
      n -= take;
      ++s;
    }
  }
};

TokenDataset::TokenDataset(const std::string& dir, TokenDatasetOptions options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  if (options.seq_len == 0)
    throw UsageError(
        "TokenDataset: seq_len is 0; set TokenDatasetOptions::seq_len (the examples' --seq-len) to the model's "
        "context length");
  s.options = options;
  // A path that names nothing is a wrong option, not damage: a launcher must not retry it.
  if (struct stat st{}; ::stat(dir.c_str(), &st) != 0 && errno == ENOENT)
    throw UsageError("dataset directory " + dir +
                     " does not exist: give the directory tenax-data encode wrote (its "
                     "--output), e.g. one made by scripts/prepare-corpus.sh");
  const DatasetIndex index = data::read_index(dir);
  const SplitId split = options.split == Split::Train ? SplitId::Train : SplitId::Validation;
  const data::SplitIndex& entries = index.split(split);
  s.width = index.token_bytes;
  s.info.dir = dir;
  s.info.vocab_size = index.vocab_size;
  s.info.token_bytes = index.token_bytes;
  s.info.eos_id = index.eos_id;
  s.info.tokenizer_path = dir + "/" + index.tokenizer_file;
  s.info.index_crc32c = index.index_crc32c;
  s.info.tokens = entries.tokens;
  s.info.validation_tokens = index.split(SplitId::Validation).tokens;
  s.info.documents = entries.documents;
  s.info.shards = entries.shards.size();
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < entries.shards.size(); ++i) {
    s.shards.push_back(std::make_unique<MappedShard>(dir + "/" + entries.shards[i].file, entries.shards[i], index,
                                                     split, static_cast<std::uint32_t>(i)));
    if (options.verify_checksums) s.shards.back()->verify_payload();
    s.starts.push_back(at);
    at += entries.shards[i].tokens;  // the index's sum was checked for overflow
  }
  if (entries.tokens < std::uint64_t{options.seq_len} + 1)
    throw UsageError("the " + std::string(split_name(options.split)) + " split of " + dir + " has " +
                     std::to_string(entries.tokens) + " tokens; one sample of seq_len " +
                     std::to_string(options.seq_len) + " needs " + std::to_string(std::uint64_t{options.seq_len} + 1) +
                     ": use a shorter seq_len or a larger dataset" +
                     (split == SplitId::Validation ? " (tenax-data encode --validation-fraction)" : ""));
  s.samples = (entries.tokens - 1) / options.seq_len;
  s.order = std::make_unique<data::SampleOrder>(s.samples, options.seed, options.shuffle);
}

TokenDataset::~TokenDataset() = default;

const TokenDatasetInfo& TokenDataset::info() const {
  return state_->info;
}

const TokenDatasetOptions& TokenDataset::options() const {
  return state_->options;
}

std::uint64_t TokenDataset::num_samples() const {
  return state_->samples;
}

std::size_t TokenDataset::sample_tokens() const {
  return std::size_t{state_->options.seq_len} + 1;
}

std::uint64_t TokenDataset::sample_at(std::uint64_t position) const {
  return state_->order->at(position);
}

void TokenDataset::fill(std::uint64_t first_position, std::size_t count, std::int32_t* out) const {
  const State& s = *state_;
  std::uint64_t last = 0;
  if (__builtin_add_overflow(first_position, std::uint64_t{count}, &last))
    throw UsageError("TokenDataset::fill: positions " + std::to_string(first_position) + " + " + std::to_string(count) +
                     " overflow 64 bits");
  const std::size_t row = sample_tokens();
  for (std::size_t j = 0; j < count; ++j) {
    const std::uint64_t k = s.order->at(first_position + j);
    s.copy_tokens(k * s.options.seq_len, row, out + j * row);  // k < N, so k*seq_len + row <= T
  }
  s.served_samples.fetch_add(count, std::memory_order_relaxed);
  s.fill_calls.fetch_add(1, std::memory_order_relaxed);
}

std::string TokenDataset::identity() const {
  char crc[16];
  std::snprintf(crc, sizeof crc, "0x%08x", info().index_crc32c);
  return std::string("token dataset ") + crc + " (" + std::string(split_name(options().split)) + " split)";
}

void TokenDataset::fill(std::uint64_t first, std::size_t count, std::size_t seq_len, std::int32_t* out) const {
  if (seq_len != state_->options.seq_len)
    throw UsageError("TokenDataset " + state_->info.dir + " was opened with seq_len " +
                     std::to_string(state_->options.seq_len) + " but is asked for samples of seq_len " +
                     std::to_string(seq_len) + ": open it with the sequence length the model trains on");
  fill(first, count, out);
}

TokenDatasetCounters TokenDataset::counters() const {
  TokenDatasetCounters c;
  c.samples = state_->served_samples.load(std::memory_order_relaxed);
  c.tokens = c.samples * sample_tokens();
  c.bytes_read = c.tokens * state_->width;
  c.fill_calls = state_->fill_calls.load(std::memory_order_relaxed);
  return c;
}

}  // namespace tenax
