#include "data/dataset_check.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "checkpoint/crc32c.hpp"
#include "core/unique_fd.hpp"
#include "data/byte_order.hpp"
#include "data/shard_format.hpp"
#include "tenax/error.hpp"

namespace tenax::data {
namespace {

constexpr std::size_t kChunk = 4 << 20;

// An open file for reading.
struct Reader {
  UniqueFd fd;
  std::uint64_t size = 0;
  std::string error;
  explicit Reader(const std::string& path) {
    do
      fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));  // a FIFO: refused below
    while (!fd.valid() && errno == EINTR);
    if (!fd.valid()) {
      error = path + ": " + std::strerror(errno);
      return;
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      error = path + ": not a regular file";
      return;
    }
    size = static_cast<std::uint64_t>(st.st_size);
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  }
  // Reads up to n bytes; returns the count (0 at the end), -1 with `error` set on failure.
  ssize_t read(void* out, std::size_t n, const std::string& path) {
    while (true) {
      const ssize_t got = ::read(fd.get(), out, n);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) error = path + ": read: " + std::strerror(errno);
      return got;
    }
  }
};

// Reads and checks the header of the file `in` has open (left positioned after it).
std::string read_checked_header(Reader& in, const std::string& path, const ShardEntry& entry, const DatasetIndex& index,
                                SplitId split, std::uint32_t number, ShardHeader* out) {
  unsigned char head[kShardHeaderBytes];
  std::size_t have = 0;
  while (have < sizeof head) {
    const ssize_t n = in.read(head + have, sizeof head - have, path);
    if (n < 0) return in.error;
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
  }
  try {
    *out = parse_shard_header(head, have, in.size, path);
  } catch (const IoError& e) {
    return e.what();
  }
  const std::string disagreement = header_disagreement(*out, entry, index, split, number);
  return disagreement.empty() ? disagreement : "token shard " + path + ": " + disagreement;
}

}  // namespace

std::string header_disagreement(const ShardHeader& h, const ShardEntry& entry, const DatasetIndex& index, SplitId split,
                                std::uint32_t number) {
  const auto says = [](const std::string& what, const std::string& header, const std::string& listed) {
    return "its header says " + what + " " + header + ", the index says " + listed;
  };
  if (h.token_count != entry.tokens)
    return says("token count", std::to_string(h.token_count), std::to_string(entry.tokens));
  if (h.payload_crc32c != entry.crc32c) return says("payload checksum", hex32(h.payload_crc32c), hex32(entry.crc32c));
  if (h.vocab_size != index.vocab_size)
    return says("vocabulary size", std::to_string(h.vocab_size), std::to_string(index.vocab_size));
  if (h.split != split) return says("split", std::string(split_id_name(h.split)), std::string(split_id_name(split)));
  if (h.shard_number != number) return says("shard number", std::to_string(h.shard_number), std::to_string(number));
  return "";
}

std::string shard_header_problem(const std::string& path, const ShardEntry& entry, const DatasetIndex& index,
                                 SplitId split, std::uint32_t number) {
  Reader in(path);
  if (!in.error.empty()) return in.error;
  ShardHeader h;
  return read_checked_header(in, path, entry, index, split, number, &h);
}

std::string shard_file_problem(const std::string& path, const ShardEntry& entry, const DatasetIndex& index,
                               SplitId split, std::uint32_t number, bool check_ids, std::uint64_t* bytes_read) {
  Reader in(path);
  if (!in.error.empty()) return in.error;
  ShardHeader h;
  if (std::string problem = read_checked_header(in, path, entry, index, split, number, &h); !problem.empty())
    return problem;
  std::vector<unsigned char> buf(kChunk);
  std::uint32_t crc = 0;
  std::uint64_t done = 0;
  const std::uint64_t payload = in.size - kShardHeaderBytes;
  const std::uint32_t width = h.token_bytes;
  while (done < payload) {
    const ssize_t n = in.read(buf.data(), buf.size(), path);
    if (n < 0) return in.error;
    if (n == 0) return path + ": the file ends early (it shrank while read)";
    const auto got = static_cast<std::size_t>(n);
    crc = ckpt::crc32c_extend(crc, buf.data(), got);
    if (check_ids) {
      // Chunks are multiples of the width except at the very end, and the payload is a multiple of the width.
      if (got % width != 0) return path + ": short read across a token";
      for (std::size_t i = 0; i < got; i += width) {
        const std::uint32_t id = width == 2 ? load_le16(buf.data() + i) : load_le32(buf.data() + i);
        if (id >= index.vocab_size)
          return path + ": token " + std::to_string((done + i) / width) + " is id " + std::to_string(id) +
                 ", outside the vocabulary (size " + std::to_string(index.vocab_size) + ")";
      }
    }
    done += got;
    if (bytes_read) *bytes_read += got;
  }
  if (bytes_read) *bytes_read += kShardHeaderBytes;
  if (crc != h.payload_crc32c)
    return path + ": payload checksum mismatch (recorded " + hex32(h.payload_crc32c) + ", computed " + hex32(crc) + ")";
  return "";
}

std::string tokenizer_file_problem(const std::string& path, const DatasetIndex& index, std::uint64_t* bytes_read) {
  Reader in(path);
  if (!in.error.empty()) return in.error;
  if (in.size != index.tokenizer_bytes)
    return path + ": " + std::to_string(in.size) + " bytes, the index records " + std::to_string(index.tokenizer_bytes);
  std::vector<unsigned char> buf(kChunk);
  std::uint32_t crc = 0;
  std::uint64_t done = 0;
  while (done < in.size) {
    const ssize_t n = in.read(buf.data(), buf.size(), path);
    if (n < 0) return in.error;
    if (n == 0) return path + ": the file ends early (it shrank while read)";
    crc = ckpt::crc32c_extend(crc, buf.data(), static_cast<std::size_t>(n));
    done += static_cast<std::uint64_t>(n);
  }
  if (bytes_read) *bytes_read += done;
  if (crc != index.tokenizer_crc32c)
    return path + ": checksum mismatch (recorded " + hex32(index.tokenizer_crc32c) + ", computed " + hex32(crc) + ")";
  return "";
}

std::vector<std::string> dataset_problems(const std::string& dir, const DatasetIndex& index, bool check_ids,
                                          std::uint64_t* bytes_read) {
  std::vector<std::string> problems;
  if (std::string p = tokenizer_file_problem(dir + "/" + index.tokenizer_file, index, bytes_read); !p.empty())
    problems.push_back(p);
  for (SplitId split : {SplitId::Train, SplitId::Validation}) {
    const auto& shards = index.split(split).shards;
    for (std::size_t i = 0; i < shards.size(); ++i)
      if (std::string p = shard_file_problem(dir + "/" + shards[i].file, shards[i], index, split,
                                             static_cast<std::uint32_t>(i), check_ids, bytes_read);
          !p.empty())
        problems.push_back(p);
  }
  return problems;
}

std::vector<DatasetFile> dataset_files(const DatasetIndex& index, std::uint64_t index_bytes) {
  std::vector<DatasetFile> files;
  files.push_back({index.tokenizer_file, index.tokenizer_bytes});
  for (SplitId split : {SplitId::Train, SplitId::Validation})
    for (const ShardEntry& e : index.split(split).shards)
      files.push_back({e.file, kShardHeaderBytes + e.tokens * index.token_bytes});  // < 2^63: kMaxSplitTokens
  files.push_back({kIndexName, index_bytes});
  return files;
}

}  // namespace tenax::data
