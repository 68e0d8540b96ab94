#include "data/dataset_index.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "checkpoint/crc32c.hpp"
#include "core/file_system.hpp"
#include "core/json.hpp"
#include "core/unique_fd.hpp"
#include "data/shard_format.hpp"
#include "tenax/error.hpp"

namespace tenax::data {
namespace {

const char* const kFix =
    "; the index is damaged or was not written by tenax-data: check the dataset with `tenax-data verify DIR` and "
    "re-create it with `tenax-data encode`";

[[noreturn]] void damaged(const std::string& file, const std::string& what) {
  throw DataError("dataset index " + file + ": " + what + kFix);
}

std::uint32_t read_u32(const json::Value& v, std::uint64_t max = 0xffffffffull) {
  const std::uint64_t x = v.u64();
  if (x > max) throw json::Error(v.describe() + " = " + std::to_string(x) + " is above " + std::to_string(max));
  return static_cast<std::uint32_t>(x);
}

void check_members(const json::Value& object, std::initializer_list<std::string_view> known) {
  for (const json::Value& m : object.members()) {
    bool ok = false;
    for (std::string_view k : known)
      ok = ok || m.key() == k;
    if (!ok) throw json::Error("unknown " + m.describe() + " (this tenax reads index version 1)");
  }
}

SplitIndex parse_split(const json::Value& v, const std::string& name) {
  check_members(v, {"documents", "tokens", "shards"});
  SplitIndex s;
  s.documents = v.at("documents").u64();
  s.tokens = v.at("tokens").u64();
  const auto& shards = v.at("shards").array();
  if (shards.size() > kMaxShardsPerSplit)
    throw json::Error("split '" + name + "' lists " + std::to_string(shards.size()) + " shards, more than " +
                      std::to_string(kMaxShardsPerSplit));
  std::uint64_t sum = 0;
  for (const json::Value& e : shards) {
    check_members(e, {"file", "tokens", "crc32c"});
    ShardEntry entry{e.at("file").string(), e.at("tokens").u64(), read_u32(e.at("crc32c"))};
    if (entry.tokens == 0) throw json::Error(e.describe() + " of split '" + name + "' has no tokens");
    if (__builtin_add_overflow(sum, entry.tokens, &sum))
      throw json::Error("the token counts of split '" + name + "' overflow 64 bits");
    s.shards.push_back(std::move(entry));
  }
  if (sum > kMaxSplitTokens)
    throw json::Error("split '" + name + "' holds " + std::to_string(sum) + " tokens, more than a dataset may (2^60)");
  if (sum != s.tokens)
    throw json::Error("split '" + name + "' records " + std::to_string(s.tokens) + " tokens but its shards hold " +
                      std::to_string(sum));
  return s;
}

void append_split(std::string& o, const char* name, const SplitIndex& s) {
  o += "    " + json::quote(name) + ": {\"documents\": " + std::to_string(s.documents) +
       ", \"tokens\": " + std::to_string(s.tokens) + ", \"shards\": [";
  for (std::size_t i = 0; i < s.shards.size(); ++i) {
    const ShardEntry& e = s.shards[i];
    o += i ? ",\n      " : "\n      ";
    o += "{\"file\": " + json::quote(e.file) + ", \"tokens\": " + std::to_string(e.tokens) +
         ", \"crc32c\": " + std::to_string(e.crc32c) + "}";
  }
  o += s.shards.empty() ? "]}" : "\n    ]}";
}

// The rules both the writer and the reader hold an index to; returns the first broken one.
std::string index_problem(const DatasetIndex& x) {
  if (x.vocab_size == 0 || x.vocab_size > 0x7fffffffu)
    return "vocab_size " + std::to_string(x.vocab_size) + " is outside 1..2147483647";
  if (x.token_bytes != token_bytes_for_vocab(x.vocab_size))
    return "token_bytes " + std::to_string(x.token_bytes) + " does not match vocab_size " +
           std::to_string(x.vocab_size) + " (2 up to 65536 ids, else 4)";
  if (x.eos_id < -1 || x.eos_id >= static_cast<std::int64_t>(x.vocab_size))
    return "eos_id " + std::to_string(x.eos_id) + " is neither -1 nor an id below vocab_size " +
           std::to_string(x.vocab_size);
  std::set<std::string> names{kIndexName};
  auto check_name = [&](const std::string& name, const std::string& what) -> std::string {
    if (std::string p = file_name_problem(name); !p.empty()) return what + " file name '" + name + "' " + p;
    if (!names.insert(name).second) return what + " file name '" + name + "' is used twice";
    return "";
  };
  if (std::string p = check_name(x.tokenizer_file, "tokenizer"); !p.empty()) return p;
  for (SplitId id : {SplitId::Train, SplitId::Validation})
    for (const ShardEntry& e : x.split(id).shards)
      if (std::string p = check_name(e.file, std::string(split_id_name(id)) + " shard"); !p.empty()) return p;
  if (x.train.shards.empty()) return "the train split has no shards";
  if (!std::isfinite(x.source.validation_fraction) || x.source.validation_fraction < 0 ||
      x.source.validation_fraction >= 1)
    return "validation_fraction " + json::number(x.source.validation_fraction) + " is outside [0, 1)";
  return "";
}

}  // namespace

std::string_view split_id_name(SplitId id) {
  return id == SplitId::Train ? "train" : "validation";
}

std::string file_name_problem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > 255) return "is longer than 255 bytes";
  if (name[0] == '.') return "starts with '.'";
  for (char c : name) {
    const bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return "has a character other than A-Z a-z 0-9 . _ - (a dataset names only files in its own directory)";
  }
  return "";
}

std::string serialize_index(DatasetIndex& x) {
  if (std::string p = index_problem(x); !p.empty()) throw UsageError("cannot write a dataset index: " + p);
  std::string o = "{\n";
  o += "  \"format\": " + json::quote(kIndexFormat) + ",\n";
  o += "  \"version\": " + std::to_string(kIndexVersion) + ",\n";
  o += "  \"vocab_size\": " + std::to_string(x.vocab_size) + ",\n";
  o += "  \"token_bytes\": " + std::to_string(x.token_bytes) + ",\n";
  o += "  \"eos_id\": " + std::to_string(x.eos_id) + ",\n";
  o += "  \"tokenizer\": {\"file\": " + json::quote(x.tokenizer_file) +
       ", \"bytes\": " + std::to_string(x.tokenizer_bytes) + ", \"crc32c\": " + std::to_string(x.tokenizer_crc32c) +
       "},\n";
  o += "  \"source\": {\"documents\": " + std::to_string(x.source.documents) +
       ", \"bytes\": " + std::to_string(x.source.bytes) +
       ", \"validation_fraction\": " + json::number(x.source.validation_fraction) +
       ", \"split_seed\": " + std::to_string(x.source.split_seed) + ", \"label\": " + json::quote(x.source.label) +
       "},\n";
  o += "  \"splits\": {\n";
  append_split(o, "train", x.train);
  o += ",\n";
  append_split(o, "validation", x.validation);
  o += "\n  },\n  ";
  x.index_crc32c = ckpt::crc32c_extend(0, o.data(), o.size());
  o += std::string("\"") + kIndexChecksumKey + "\": " + std::to_string(x.index_crc32c) + "\n}\n";
  return o;
}

DatasetIndex parse_index(std::string_view text, const std::string& file) {
  DatasetIndex x;
  try {
    const json::Value root = json::Value::parse(text);
    if (root.kind() != json::Value::Kind::Object) throw json::Error("the index is not a JSON object");
    // The checksum first: a damaged index is reported as damaged, not as whichever field the damage hit.
    const json::Value& stored = root.at(kIndexChecksumKey);
    if (root.members().back().key() != kIndexChecksumKey)
      throw json::Error(std::string("\"") + kIndexChecksumKey + "\" is not the last member");
    // The key as written: one spelled with escapes ("index\u005fcrc32c") is not found, and is refused.
    const std::size_t at = text.rfind(std::string("\"") + kIndexChecksumKey + "\"");
    if (at == std::string_view::npos)
      throw json::Error(std::string("the key \"") + kIndexChecksumKey + "\" is not written plainly");
    x.index_crc32c = read_u32(stored);
    const std::uint32_t got = ckpt::crc32c_extend(0, text.data(), at);
    if (got != x.index_crc32c)
      throw json::Error("checksum mismatch (recorded " + hex32(x.index_crc32c) + ", text " + hex32(got) + ")");

    if (root.at("format").string() != kIndexFormat)
      throw json::Error("member 'format' is not \"" + std::string(kIndexFormat) + "\"");
    const std::uint64_t version = root.at("version").u64();
    if (version != kIndexVersion)
      throw DataError("dataset index " + file + " has version " + std::to_string(version) + "; this tenax reads " +
                      std::to_string(kIndexVersion) + ": re-create the dataset with this tenax's `tenax-data encode`");
    check_members(root, {"format", "version", "vocab_size", "token_bytes", "eos_id", "tokenizer", "source", "splits",
                         kIndexChecksumKey});
    x.vocab_size = read_u32(root.at("vocab_size"), 0x7fffffffu);
    x.token_bytes = read_u32(root.at("token_bytes"));
    x.eos_id = root.at("eos_id").i64();
    const json::Value& tok = root.at("tokenizer");
    check_members(tok, {"file", "bytes", "crc32c"});
    x.tokenizer_file = tok.at("file").string();
    x.tokenizer_bytes = tok.at("bytes").u64();
    x.tokenizer_crc32c = read_u32(tok.at("crc32c"));
    const json::Value& src = root.at("source");
    check_members(src, {"documents", "bytes", "validation_fraction", "split_seed", "label"});
    x.source.documents = src.at("documents").u64();
    x.source.bytes = src.at("bytes").u64();
    x.source.validation_fraction = src.at("validation_fraction").number();
    x.source.split_seed = src.at("split_seed").u64();
    x.source.label = src.at("label").string();
    const json::Value& splits = root.at("splits");
    check_members(splits, {"train", "validation"});
    x.train = parse_split(splits.at("train"), "train");
    x.validation = parse_split(splits.at("validation"), "validation");
  } catch (const json::Error& e) {
    damaged(file, e.what());
  }
  if (std::string p = index_problem(x); !p.empty()) damaged(file, p);
  return x;
}

DatasetIndex read_index(const std::string& dir, std::string* text_out) {
  const std::string file = dir + "/" + kIndexName;
  const UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));  // a FIFO: refused below, not waited on
  if (!fd.valid()) {
    const int err = errno;
    struct stat named {};
    if (err == ENOTDIR && ::stat(dir.c_str(), &named) == 0 && !S_ISDIR(named.st_mode))
      throw DataError(dir + " is a file, not a dataset directory: pass the directory that holds " + kIndexName +
                      " (written by `tenax-data encode`)");
    const std::string message =
        "cannot open dataset index " + file + ": " + std::strerror(err) +
        (err == ENOENT ? " (is " + dir + " a dataset directory written by `tenax-data encode`? it must hold index.json)"
                       : std::string());
    if (err == ENOENT || err == ENOTDIR) throw DataError(message);  // no dataset there
    throw IoError(message);
  }
  std::string text;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    throw DataError("dataset index " + file + " is not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > kIndexMaxBytes) {
    damaged(file, "it has " + std::to_string(st.st_size) + " bytes, more than an index may (" +
                      std::to_string(kIndexMaxBytes) + ")");
  }
  text.resize(static_cast<std::size_t>(st.st_size));
  try {
    fs::read_exact(fd.get(), text.data(), text.size(), 0, file);
  } catch (const IoError& e) {
    throw IoError(std::string("reading dataset index: ") + e.what());
  }
  DatasetIndex index = parse_index(text, file);
  if (text_out) *text_out = std::move(text);
  return index;
}

}  // namespace tenax::data
