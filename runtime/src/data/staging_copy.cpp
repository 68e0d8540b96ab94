// One node's copier: reuse a valid staged copy, or copy the dataset into a temporary directory (checksummed while
// copied, read back from disk after fsync), and rename it into place. Local failures become a fall-back with the
// reason; a damaged shared dataset is a SourceError.
#include "data/staging_copy.hpp"
#include "data/shard_format.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <vector>

#include "checkpoint/crc32c.hpp"
#include "core/abandoned_siblings.hpp"
#include "core/file_system.hpp"
#include "core/unique_fd.hpp"
#include "data/dataset_check.hpp"
#include "data/dataset_index.hpp"
#include "tenax/log.hpp"

namespace tenax::data {
namespace {

constexpr std::size_t kChunk = 4 << 20;

// A failure on the local side: the copy is abandoned and the job falls back to the shared dataset.
class LocalError : public IoError {
 public:
  using IoError::IoError;
};

std::string mib(std::uint64_t bytes) {
  char buf[48];
  if (bytes < (10u << 20))  // small amounts in KiB: "0.2 MiB free, needs 0.2 MiB" said nothing
    std::snprintf(buf, sizeof buf, "%.0f KiB", static_cast<double>(bytes) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

[[noreturn]] void local_errno(const std::string& what, const std::string& path, int err) {
  throw LocalError(what + " " + path + ": " + std::strerror(err));
}

// Copies src to dst (created, must not exist), returning the CRC32C of src's bytes from `crc_from` on and the first
// `head_size` bytes in `head`. Read failures are SourceErrors, write failures LocalErrors. dst is fsynced and its
// pages dropped from the cache, so the read back that follows comes from the disk.
std::uint32_t copy_file(const std::string& src, const std::string& dst, std::uint64_t expected_bytes,
                        std::uint64_t crc_from, std::vector<unsigned char>& buf, std::string* head,
                        std::size_t head_size) {
  UniqueFd in, out;
  do
    in.reset(::open(src.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));  // a FIFO: refused below
  while (!in.valid() && errno == EINTR);
  if (!in.valid()) throw SourceError("cannot open " + src + " of the shared dataset: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode))
    throw SourceError(src + " of the shared dataset is not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) != expected_bytes)
    throw SourceError(src + " of the shared dataset has " + std::to_string(st.st_size) +
                      " bytes; its index describes " + std::to_string(expected_bytes) +
                      ": the dataset is damaged; check it with `tenax-data verify` and re-create it");
  ::posix_fadvise(in.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  do
    out.reset(::open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  while (!out.valid() && errno == EINTR);
  if (!out.valid()) local_errno("create", dst, errno);
  std::uint32_t crc = 0;
  std::uint64_t done = 0;
  while (done < expected_bytes) {
    const ssize_t n = ::read(in.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SourceError("read " + src + " of the shared dataset: " + std::strerror(errno));
    if (n == 0) throw SourceError(src + " of the shared dataset ends early (it shrank while copied)");
    const auto got = static_cast<std::size_t>(n);
    const std::uint64_t from = done >= crc_from ? 0 : crc_from - done;
    if (from < got) crc = ckpt::crc32c_extend(crc, buf.data() + from, got - static_cast<std::size_t>(from));
    if (head && head->size() < head_size) {
      const std::size_t take = std::min(head_size - head->size(), got);
      head->append(reinterpret_cast<const char*>(buf.data()), take);
    }
    std::size_t written = 0;
    while (written < got) {
      const ssize_t w = ::write(out.get(), buf.data() + written, got - written);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) local_errno("write", dst, errno);
      written += static_cast<std::size_t>(w);
    }
    done += got;
  }
  int rc;
  do
    rc = ::fsync(out.get());
  while (rc != 0 && errno == EINTR);
  if (rc != 0) local_errno("fsync", dst, errno);
  ::posix_fadvise(out.get(), 0, 0, POSIX_FADV_DONTNEED);
  if (::close(out.release()) != 0) local_errno("close", dst, errno);
  return crc;
}

// Copies every file of the dataset into `tmp`, checking the shared bytes against the index while copying and the
// local bytes after writing.
void copy_dataset(const std::string& dataset_dir, const std::string& tmp, const DatasetIndex& index,
                  const std::string& index_text, const AfterCopyHook& after_copy, LocalStageResult& r) {
  std::vector<unsigned char> buf(kChunk);
  auto read_back = [](const std::string& problem) {
    if (!problem.empty())
      throw LocalError("the staged copy does not read back as written (" + problem +
                       "): the local disk may be failing");
  };
  {
    const std::string src = dataset_dir + "/" + index.tokenizer_file;
    const std::string dst = tmp + "/" + index.tokenizer_file;
    const std::uint32_t crc = copy_file(src, dst, index.tokenizer_bytes, 0, buf, nullptr, 0);
    if (crc != index.tokenizer_crc32c)
      throw SourceError(src + " of the shared dataset has checksum " + hex32(crc) + "; its index records " +
                        hex32(index.tokenizer_crc32c) + ": the dataset is damaged; re-create it");
    r.bytes_copied += index.tokenizer_bytes;
    if (after_copy) after_copy(dst);
    read_back(tokenizer_file_problem(dst, index, &r.bytes_verified));
  }
  for (SplitId split : {SplitId::Train, SplitId::Validation}) {
    const auto& shards = index.split(split).shards;
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const ShardEntry& e = shards[i];
      const std::string src = dataset_dir + "/" + e.file;
      const std::string dst = tmp + "/" + e.file;
      const std::uint64_t bytes = kShardHeaderBytes + e.tokens * index.token_bytes;
      std::string head;
      const std::uint32_t crc = copy_file(src, dst, bytes, kShardHeaderBytes, buf, &head, kShardHeaderBytes);
      try {
        const ShardHeader h = parse_shard_header(head.data(), head.size(), bytes, src);
        if (h.token_count != e.tokens || h.payload_crc32c != e.crc32c || h.vocab_size != index.vocab_size ||
            h.split != split || h.shard_number != i)
          throw IoError("token shard " + src + ": its header does not match its entry in the index");
      } catch (const IoError& err) {
        throw SourceError(std::string(err.what()) + " (in the shared dataset)");
      }
      if (crc != e.crc32c)
        throw SourceError("token shard " + src + " of the shared dataset: payload checksum " + hex32(crc) +
                          ", the index records " + hex32(e.crc32c) +
                          ": the dataset is damaged; check it with `tenax-data verify` and re-create it");
      r.bytes_copied += bytes;
      if (after_copy) after_copy(dst);
      read_back(shard_file_problem(dst, e, index, split, static_cast<std::uint32_t>(i), false, &r.bytes_verified));
    }
  }
  try {
    fs::write_file_durable(tmp + "/" + kIndexName, index_text);
    fs::fsync_path(tmp);
  } catch (const IoError& e) {
    throw LocalError(e.what());
  }
  r.bytes_copied += index_text.size();
  r.files = index.train.shards.size() + index.validation.shards.size() + 2;
}

// Moves a directory out of the way under a unique name, then removes it (a job still reading the old copy keeps its
// open files).
void discard(const std::string& dir, const std::string& node_name) {
  std::string aside = detail::sibling_name(dir, "discard", node_name);
  // A name an earlier process of the same pid left (not yet removed: it was in use) is skipped.
  for (int tries = 0; ::rename(dir.c_str(), aside.c_str()) != 0; ++tries) {
    if ((errno != EEXIST && errno != ENOTEMPTY) || tries == 1000) local_errno("move aside", dir, errno);
    aside = detail::sibling_name(dir, "discard", node_name);
  }
  const UniqueFd in_use = detail::lock_sibling(aside);  // removed by this process: no other copier's to take
  try {
    fs::remove_tree(aside);
  } catch (const IoError& e) {
    throw LocalError(e.what());
  }
}

// Whether `source` (the shared dataset) is `target` or lies inside it, through any links: discarding `target` would
// then remove the source.
bool source_within(const std::string& source, const std::string& target) {
  std::error_code error;
  const std::filesystem::path real_source = std::filesystem::canonical(source, error);
  if (error) return false;
  const std::filesystem::path real_target = std::filesystem::canonical(target, error);
  if (error) return false;
  const auto [t, s] = std::mismatch(real_target.begin(), real_target.end(), real_source.begin(), real_source.end());
  return t == real_target.end();
}

}  // namespace

std::string staged_dir_name(std::uint32_t index_crc32c) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "tenax-data-%08x", index_crc32c);
  return buf;
}

namespace {

// A name staged_dir_name() makes: any dataset's copy, whose killed copier's folders count as abandoned too (a dataset
// re-encoded since has another name, and its old copy's leftovers would take the disk for good otherwise).
bool is_staged_dir_name(const std::string& name) {
  constexpr std::string_view prefix = "tenax-data-";
  if (name.size() != prefix.size() + 8 || name.compare(0, prefix.size(), prefix) != 0) return false;
  for (std::size_t i = prefix.size(); i < name.size(); ++i)
    if (!std::isxdigit(static_cast<unsigned char>(name[i])) || std::isupper(static_cast<unsigned char>(name[i])))
      return false;
  return true;
}

}  // namespace

std::string staged_copy_problem(const std::string& dir, const std::string& index_text, std::uint64_t* bytes_read) {
  std::string staged_text;
  DatasetIndex index;
  try {
    index = read_index(dir, &staged_text);
  } catch (const IoError& e) {
    return e.what();
  }
  if (staged_text != index_text) return dir + "/" + kIndexName + " differs from the shared dataset's index";
  std::vector<std::string> problems = dataset_problems(dir, index, false, bytes_read);
  return problems.empty() ? "" : problems.front();
}

LocalStageResult stage_on_this_node(const std::string& dataset_dir, const std::string& stage_root,
                                    const std::string& node_name, const AfterCopyHook& after_copy) {
  const auto t0 = std::chrono::steady_clock::now();
  LocalStageResult r;
  r.dir = dataset_dir;
  std::string index_text;
  DatasetIndex index;
  try {
    index = read_index(dataset_dir, &index_text);
  } catch (const IoError& e) {
    throw SourceError(e.what());
  }
  const std::string target = stage_root + "/" + staged_dir_name(index.index_crc32c);
  std::string tmp;
  auto finish = [&](StagingOutcome outcome, std::string dir) {
    r.outcome = outcome;
    r.dir = std::move(dir);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  try {
    if (source_within(dataset_dir, target)) {
      // The dataset given is where its staged copy belongs (--data names a path a staging log printed): it is read
      // in place. It is the only copy there is, so it is never discarded or replaced, whatever its state.
      std::uint64_t verified = 0;
      const std::string problem = staged_copy_problem(dataset_dir, index_text, &verified);
      r.bytes_verified += verified;
      if (!problem.empty())
        throw SourceError(problem + " (the dataset " + dataset_dir + " is itself at its staging place " + target +
                          "): the dataset is damaged; check it with `tenax-data verify` and re-create it");
      r.files = index.train.shards.size() + index.validation.shards.size() + 2;
      return finish(StagingOutcome::Reused, dataset_dir);
    }
    struct stat st {};
    if (::lstat(target.c_str(), &st) == 0) {
      std::uint64_t verified = 0;
      const std::string problem = staged_copy_problem(target, index_text, &verified);
      r.bytes_verified += verified;
      if (problem.empty()) {
        r.files = index.train.shards.size() + index.validation.shards.size() + 2;
        return finish(StagingOutcome::Reused, target);
      }
      // Another user's copy (a stage directory shared between users) may only look damaged to this one, who could
      // not remove it anyway: it is left alone.
      if (st.st_uid != ::geteuid())
        throw LocalError(
            "the staged copy " + target + " belongs to another user and is not usable by this one (" + problem +
            "): give this job a stage directory of its own, e.g. TENAX_DATA_STAGE_DIR=" + stage_root + "/$USER");
      r.reason = "the staged copy " + target + " was not valid (" + problem + ") and was replaced";
      discard(target, node_name);
    }
    try {
      fs::make_dirs(stage_root);
    } catch (const IoError& e) {
      throw LocalError(e.what());
    }
    // Before the free-space check: a copier killed mid-copy (a job past its time limit) left up to a whole copy.
    for (const char* kind : {"tmp", "discard"})
      for (const std::string& removed : detail::remove_abandoned_siblings(target, kind, node_name, is_staged_dir_name))
        TENAX_LOG(Info, "data") << "removed " << removed << ", left by a staging copy that was killed";
    std::uint64_t needed = 0;
    for (const DatasetFile& f : dataset_files(index, index_text.size()))
      needed += f.bytes;
    struct statvfs vfs {};
    if (::statvfs(stage_root.c_str(), &vfs) != 0) local_errno("statvfs", stage_root, errno);
    const std::uint64_t free_bytes = static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    if (free_bytes < needed)
      throw LocalError("TENAX_DATA_STAGE_DIR=" + stage_root + " has " + mib(free_bytes) + " free, the dataset needs " +
                       mib(needed) +
                       ": free space there, point TENAX_DATA_STAGE_DIR at a larger local disk, or unset "
                       "it");
    detail::SiblingDir fresh;  // locked while the copy is made, until this function returns
    const int made = detail::make_sibling_dir(target, "tmp", node_name, fresh);
    tmp = fresh.path;
    if (made != 0) {
      tmp.clear();
      local_errno("create directory", fresh.path, made);
    }
    copy_dataset(dataset_dir, tmp, index, index_text, after_copy, r);
    if (!fs::rename_no_replace(tmp, target)) {
      // Another job on this node staged the same dataset meanwhile: use theirs if it is valid.
      std::uint64_t verified = 0;
      const std::string problem = staged_copy_problem(target, index_text, &verified);
      r.bytes_verified += verified;
      fs::remove_tree(tmp);
      tmp.clear();
      if (!problem.empty()) throw LocalError("a copy staged meanwhile by another job is not valid: " + problem);
      return finish(StagingOutcome::Reused, target);
    }
    tmp.clear();
    fs::fsync_path(stage_root);
    return finish(StagingOutcome::Copied, target);
  } catch (const SourceError&) {
    if (!tmp.empty()) {
      try {
        fs::remove_tree(tmp);
      } catch (const std::exception&) {
      }
    }
    throw;
  } catch (const std::exception& e) {
    if (!tmp.empty()) {
      try {
        fs::remove_tree(tmp);
      } catch (const std::exception&) {
        // The copy is abandoned either way; a leftover .tmp directory is never mistaken for a staged copy.
      }
    }
    r.reason = r.reason.empty() ? e.what() : r.reason + "; then " + e.what();
    return finish(StagingOutcome::FellBack, dataset_dir);
  }
}

}  // namespace tenax::data
