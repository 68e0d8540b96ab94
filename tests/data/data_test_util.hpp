// Helpers of the data tests: scratch directories, synthetic datasets whose tokens say where they are, byte surgery
// on files, and the real corpus (python3.11-doc's reST sources).
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/dataset_writer.hpp"

namespace tenax::test {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it at the end of the test.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/tenax-data-" + tag + "-XXXXXX";
    if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp " + templ + " failed");
    path_ = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Token i of a synthetic split's stream: its position (mod vocab), offset per split, so any window says where it
// came from.
inline std::int32_t synthetic_token(std::uint64_t i, std::uint32_t vocab, bool validation) {
  return static_cast<std::int32_t>((i + (validation ? 7 : 0)) % vocab);
}

struct SyntheticDataset {
  std::vector<std::int32_t> train;
  std::vector<std::int32_t> validation;
  data::DatasetIndex index;
};

// Writes a dataset with `train_tokens` and `validation_tokens` synthetic tokens in shards of `shard_tokens`, appended
// in pieces of `piece` tokens (so shard boundaries fall inside appends). No end-of-document ids.
inline SyntheticDataset write_synthetic(const std::string& dir, std::uint64_t train_tokens,
                                        std::uint64_t validation_tokens, std::uint32_t vocab,
                                        std::uint64_t shard_tokens, std::uint64_t piece = 1000,
                                        const std::string& label = "synthetic") {
  SyntheticDataset out;
  data::DatasetWriter w(dir, vocab, -1, shard_tokens);
  for (int v = 0; v < 2; ++v) {
    const std::uint64_t n = v ? validation_tokens : train_tokens;
    std::vector<std::int32_t>& all = v ? out.validation : out.train;
    for (std::uint64_t i = 0; i < n; ++i)
      all.push_back(synthetic_token(i, vocab, v == 1));
    for (std::uint64_t at = 0; at < n; at += piece) {
      const std::uint64_t len = std::min(piece, n - at);
      w.append(v ? data::SplitId::Validation : data::SplitId::Train,
               std::span<const std::int32_t>(all.data() + at, static_cast<std::size_t>(len)));
    }
  }
  w.set_tokenizer("not a real model: the synthetic tests never load it");
  data::SourceInfo source;
  source.label = label;
  w.set_source(source);
  out.index = w.commit();
  return out;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// XORs one byte of a file in place with `mask`.
inline void flip_byte(const std::string& path, std::uint64_t offset, unsigned char mask = 0x01) {
  std::string bytes = read_file(path);
  if (offset >= bytes.size()) throw std::runtime_error("flip_byte: offset beyond " + path);
  bytes[offset] = static_cast<char>(bytes[offset] ^ mask);
  write_file(path, bytes);
}

inline void truncate_file(const std::string& path, std::uint64_t size) {
  if (::truncate(path.c_str(), static_cast<off_t>(size)) != 0) throw std::runtime_error("truncate " + path);
}

// The reST sources of the Python 3.11 documentation (Debian package python3.11-doc): the real text of the tests.
inline const char* kPythonDocSources = "/usr/share/doc/python3.11/html/_sources";

inline bool have_python_docs() {
  return std::filesystem::is_directory(std::string(kPythonDocSources) + "/library");
}

}  // namespace tenax::test
