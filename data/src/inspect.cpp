// verify, info and decode: reading a dataset for people and scripts.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ostream>

#include "commands.hpp"
#include "core/file_system.hpp"
#include "core/unique_fd.hpp"
#include "data/byte_order.hpp"
#include "data/dataset_check.hpp"
#include "data/dataset_index.hpp"
#include "data/shard_format.hpp"
#include "tenax/error.hpp"
#include "tenax/tokenizer.hpp"

namespace tenax::datatool {
namespace {

using data::hex32;
using data::SplitId;

SplitId parse_split(const std::string& name) {
  if (name == "train") return SplitId::Train;
  if (name == "validation") return SplitId::Validation;
  throw UsageError("--split " + name + " is neither train nor validation");
}

// Tokens [offset, offset + count) of a split's stream, read with pread (no map: a damaged file is an error, not a
// signal).
std::vector<std::int32_t> read_stream(const std::string& dir, const data::DatasetIndex& index, SplitId split,
                                      std::uint64_t offset, std::uint64_t count) {
  const data::SplitIndex& s = index.split(split);
  std::uint64_t end = 0;
  if (__builtin_add_overflow(offset, count, &end) || end > s.tokens)
    throw UsageError("tokens " + std::to_string(offset) + " + " + std::to_string(count) + " are beyond the " +
                     std::string(data::split_id_name(split)) + " split's " + std::to_string(s.tokens) +
                     " tokens: lower --offset or --count");
  std::vector<std::int32_t> out;
  out.reserve(static_cast<std::size_t>(count));
  std::uint64_t start = 0;
  for (std::size_t number = 0; number < s.shards.size(); ++number) {
    const data::ShardEntry& e = s.shards[number];
    const std::uint64_t lo = std::max(offset, start), hi = std::min(end, start + e.tokens);
    if (lo < hi) {
      const std::string path = dir + "/" + e.file;
      // Its header first: a swapped or foreign shard of the same length would otherwise decode to another text.
      if (const std::string problem =
              data::shard_header_problem(path, e, index, split, static_cast<std::uint32_t>(number));
          !problem.empty())
        throw DataError(problem + data::kMixedDatasetFix);
      const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));  // a FIFO: not waited on
      if (!fd.valid()) throw IoError("cannot open token shard " + path + ": " + std::strerror(errno));
      std::vector<unsigned char> buf(static_cast<std::size_t>((hi - lo) * index.token_bytes));
      fs::read_exact(fd.get(), buf.data(), buf.size(), data::kShardHeaderBytes + (lo - start) * index.token_bytes,
                     path);
      for (std::size_t i = 0; i < buf.size(); i += index.token_bytes) {
        const std::uint32_t id =
            index.token_bytes == 2 ? data::load_le16(buf.data() + i) : data::load_le32(buf.data() + i);
        if (id >= index.vocab_size)
          throw IoError("token shard " + path + " holds id " + std::to_string(id) +
                        ", outside the vocabulary: run `tenax-data verify " + dir + "`");
        out.push_back(static_cast<std::int32_t>(id));
      }
    }
    start += e.tokens;
  }
  return out;
}

}  // namespace

VerifyResult verify(const std::string& dir, const std::string& label, std::ostream& out) {
  VerifyResult r;
  std::string text;
  data::DatasetIndex index;
  try {
    index = data::read_index(dir, &text);
  } catch (const IoError& e) {
    out << e.what() << "\n";
    r.problems = 1;
    return r;
  }
  r.bytes_read = text.size();
  if (!label.empty() && index.source.label != label) {
    out << dir << "/" << data::kIndexName << ": label \"" << index.source.label << "\" is not the expected \"" << label
        << "\" (made from other inputs or options)\n";
    ++r.problems;
  }
  bool tokenizer_named = false;
  for (const std::string& p : data::dataset_problems(dir, index, true, &r.bytes_read)) {
    out << p << "\n";
    ++r.problems;
    tokenizer_named = tokenizer_named || p.rfind(dir + "/" + index.tokenizer_file + ":", 0) == 0;
  }
  // The tokenizer as a program loads it: its piece count must be the dataset's vocabulary (a dataset written with
  // another model than its ids come from would otherwise be found only when a trained model samples text).
  if (!tokenizer_named) {
    try {
      Tokenizer::for_dataset(dir);
    } catch (const std::exception& e) {
      out << e.what() << "\n";
      ++r.problems;
    }
  }
  r.files = index.train.shards.size() + index.validation.shards.size() + 2;
  return r;
}

void info(const std::string& dir, std::ostream& out) {
  const data::DatasetIndex x = data::read_index(dir);
  out << "dataset        " << dir << "\n"
      << "index crc32c   " << hex32(x.index_crc32c) << " (the staging key)\n"
      << "vocab size     " << x.vocab_size << " (" << x.token_bytes << "-byte tokens)\n"
      << "eos id         " << x.eos_id << "\n"
      << "tokenizer      " << x.tokenizer_file << " (" << x.tokenizer_bytes << " bytes, crc32c "
      << hex32(x.tokenizer_crc32c) << ")\n";
  for (SplitId id : {SplitId::Train, SplitId::Validation}) {
    const data::SplitIndex& s = x.split(id);
    char name[16];
    std::snprintf(name, sizeof name, "%-15s", std::string(data::split_id_name(id)).c_str());
    out << name << s.tokens << " tokens, " << s.documents << " documents, " << s.shards.size() << " shard(s)\n";
  }
  out << "source         " << x.source.documents << " documents, " << x.source.bytes << " bytes, validation fraction "
      << x.source.validation_fraction << ", split seed " << x.source.split_seed << "\n";
  if (!x.source.label.empty()) out << "label          " << x.source.label << "\n";
}

void decode(const DecodeOptions& o, std::ostream& out) {
  const data::DatasetIndex index = data::read_index(o.dir);
  const Tokenizer tok = Tokenizer::for_dataset(o.dir);
  if (!o.ids.empty()) {
    out << tok.decode(o.ids);
    return;
  }
  if (o.count > (1u << 24)) throw UsageError("--count " + std::to_string(o.count) + " is above 16777216 tokens");
  const std::vector<std::int32_t> ids = read_stream(o.dir, index, parse_split(o.split), o.offset, o.count);
  out << tok.decode(ids);
}

}  // namespace tenax::datatool
