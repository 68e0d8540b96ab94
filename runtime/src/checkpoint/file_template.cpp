#include "checkpoint/file_template.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "core/file_system.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"

namespace tenax::ckpt {
namespace {

// Positions of each pattern of `patterns` (index by value) in `bytes`: every position is checked, so an occurrence is
// found wherever it lies. T is 4 or 8 bytes wide.
template <class T>
std::vector<std::vector<std::uint64_t>> find_all(const std::vector<std::uint8_t>& bytes,
                                                 const std::unordered_map<T, std::size_t>& patterns) {
  std::vector<std::vector<std::uint64_t>> found(patterns.size());
  if (bytes.size() < sizeof(T)) return found;
  for (std::uint64_t at = 0; at + sizeof(T) <= bytes.size(); ++at) {
    T value;
    std::memcpy(&value, bytes.data() + at, sizeof(T));
    if (auto it = patterns.find(value); it != patterns.end()) found[it->second].push_back(at);
  }
  return found;
}

// pwritev of all of `vectors` at `offset`, retrying EINTR and short writes (no progress: ENOSPC).
void write_vectors(int fd, std::vector<iovec>& vectors, std::uint64_t offset, const std::string& path) {
  std::size_t first = 0;
  while (first < vectors.size()) {
    const ssize_t n =
        ::pwritev(fd, vectors.data() + first, static_cast<int>(vectors.size() - first), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fs::throw_errno("write at byte " + std::to_string(offset) + " of", path, errno);
    if (n == 0) fs::throw_errno("write (no progress) at byte " + std::to_string(offset) + " of", path, ENOSPC);
    offset += static_cast<std::uint64_t>(n);
    for (auto left = static_cast<std::size_t>(n); left > 0;) {
      iovec& v = vectors[first];
      const std::size_t take = std::min(left, v.iov_len);
      v.iov_base = static_cast<std::uint8_t*>(v.iov_base) + take;
      v.iov_len -= take;
      left -= take;
      if (v.iov_len == 0) ++first;
    }
    while (first < vectors.size() && vectors[first].iov_len == 0)
      ++first;
  }
}

}  // namespace

// The sentinels are found by their little-endian bytes, as HDF5 stores these little-endian attributes here.
static_assert(std::endian::native == std::endian::little, "file templates assume a little-endian host");

FileStamps FileTemplate::sentinels(std::size_t datasets) {
  // Any seed serves (a collision only costs the template); random_device may throw where no entropy source exists.
  std::uint64_t seed = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  try {
    std::random_device device;
    seed ^= (static_cast<std::uint64_t>(device()) << 32) ^ device();
  } catch (const std::exception&) {
    seed ^= reinterpret_cast<std::uintptr_t>(&seed);
  }
  std::mt19937_64 random(seed);
  FileStamps s;
  s.step = random();
  std::unordered_set<std::uint32_t> used;
  while (s.crcs.size() < datasets) {
    const auto crc = static_cast<std::uint32_t>(random());
    // 0 and small numbers are common in file metadata; a collision only costs the template, but need not happen.
    if (crc > 0xFFFFFF && used.insert(crc).second) s.crcs.push_back(crc);
  }
  return s;
}

bool FileTemplate::worth_learning(const std::string& key) {
  const bool repeated = key == last_seen_;
  last_seen_ = key;
  return repeated && key != failed_;
}

bool FileTemplate::learn(const std::string& key, const std::string& path, const std::vector<DatasetRange>& datasets,
                         const FileStamps& sentinels, const FileStamps& stamps) {
  usable_ = false;
  key_ = key;
  datasets_ = datasets;
  file_size_ = fs::file_size(path);
  const int fd = fs::open_file(path, O_RDWR);
  try {
    usable_ = learn_from(fd, path, sentinels);
    if (usable_) stamp(fd, path, stamps);
  } catch (...) {
    usable_ = false;
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) {
    usable_ = false;
    fs::throw_errno("close", path, errno);
  }
  if (!usable_) {
    failed_ = key;
    runs_ = {};
    bytes_ = {};
    crc_at_ = {};
    datasets_ = {};
  }
  return usable_;
}

bool FileTemplate::learn_from(int fd, const std::string& path, const FileStamps& sentinels) {
  const std::uint64_t file_size = file_size_;
  const std::vector<DatasetRange>& datasets = datasets_;
  runs_.clear();
  bytes_.clear();
  crc_at_.assign(sentinels.crcs.size(), 0);
  // Everything outside the datasets' storage, in file order.
  std::vector<DatasetRange> taken;
  for (const DatasetRange& d : datasets)
    if (d.bytes > 0) taken.push_back(d);
  std::sort(taken.begin(), taken.end(),
            [](const DatasetRange& a, const DatasetRange& b) { return a.offset < b.offset; });
  std::uint64_t at = 0;
  auto add_run = [&](std::uint64_t end) {
    if (end > at) {
      runs_.push_back(Run{at, bytes_.size(), end - at});
      bytes_.resize(bytes_.size() + (end - at));
      fs::read_exact(fd, bytes_.data() + runs_.back().at, end - at, at, path);
    }
  };
  for (const DatasetRange& d : taken) {
    if (d.offset < at || d.offset + d.bytes > file_size) return false;  // overlapping or outside: not understood
    add_run(d.offset);
    at = d.offset + d.bytes;
  }
  add_run(file_size);

  std::unordered_map<std::uint64_t, std::size_t> step{{sentinels.step, 0}};
  const auto step_found = find_all(bytes_, step);
  if (step_found[0].size() != 1) return false;
  step_at_ = step_found[0][0];
  std::unordered_map<std::uint32_t, std::size_t> crcs;
  for (std::size_t i = 0; i < sentinels.crcs.size(); ++i)
    crcs.emplace(sentinels.crcs[i], i);
  const auto crc_found = find_all(bytes_, crcs);
  for (std::size_t i = 0; i < crc_found.size(); ++i) {
    if (crc_found[i].size() != 1) return false;
    crc_at_[i] = crc_found[i][0];
    // A match inside the step's bytes, or across the end of a run, is no attribute value.
    if (crc_at_[i] + 4 > step_at_ && crc_at_[i] < step_at_ + 8) return false;
  }
  for (const Run& run : runs_)
    for (std::uint64_t place : crc_at_)
      if (place < run.at + run.size && place + 4 > run.at + run.size) return false;
  if (std::any_of(runs_.begin(), runs_.end(),
                  [&](const Run& run) { return step_at_ < run.at + run.size && step_at_ + 8 > run.at + run.size; }))
    return false;
  return true;
}

std::vector<std::uint8_t> FileTemplate::stamped(const FileStamps& stamps) const {
  if (stamps.crcs.size() != crc_at_.size())
    throw IoError("file template: " + std::to_string(stamps.crcs.size()) + " CRCs for " +
                  std::to_string(crc_at_.size()) + " datasets");
  std::vector<std::uint8_t> out = bytes_;
  std::memcpy(out.data() + step_at_, &stamps.step, 8);
  for (std::size_t i = 0; i < crc_at_.size(); ++i)
    std::memcpy(out.data() + crc_at_[i], &stamps.crcs[i], 4);
  return out;
}

void FileTemplate::stamp(int fd, const std::string& path, const FileStamps& stamps) const {
  const std::vector<std::uint8_t> out = stamped(stamps);
  // The file offset of a place in bytes_.
  auto file_offset = [&](std::uint64_t place) {
    const auto run =
        std::upper_bound(runs_.begin(), runs_.end(), place, [](std::uint64_t p, const Run& r) { return p < r.at; }) - 1;
    return run->offset + (place - run->at);
  };
  fs::pwrite_all(fd, out.data() + step_at_, 8, file_offset(step_at_), path);
  for (std::uint64_t place : crc_at_)
    fs::pwrite_all(fd, out.data() + place, 4, file_offset(place), path);
}

void FileTemplate::create(const std::string& path, const FileStamps& stamps,
                          const std::vector<const void*>& small) const {
  const std::vector<std::uint8_t> out = stamped(stamps);
  // The pieces in file order: the learned runs and the small datasets.
  struct Piece {
    std::uint64_t offset;
    const std::uint8_t* data;
    std::uint64_t size;
  };
  std::vector<Piece> pieces;
  for (const Run& run : runs_)
    pieces.push_back(Piece{run.offset, out.data() + run.at, run.size});
  for (std::size_t i = 0; i < small.size() && i < datasets_.size(); ++i)
    if (small[i] != nullptr && datasets_[i].bytes > 0)
      pieces.push_back(Piece{datasets_[i].offset, static_cast<const std::uint8_t*>(small[i]), datasets_[i].bytes});
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.offset < b.offset; });

  const int fd = fs::open_file(path, O_WRONLY | O_TRUNC);
  try {
    // Pieces that follow one another go out in one pwritev (no copy into one buffer), up to IOV_MAX at a time.
    std::vector<iovec> vectors;
    for (std::size_t i = 0; i < pieces.size();) {
      std::size_t j = i + 1;
      while (j < pieces.size() && j - i < IOV_MAX && pieces[j].offset == pieces[j - 1].offset + pieces[j - 1].size)
        ++j;
      vectors.clear();
      for (std::size_t k = i; k < j; ++k)
        vectors.push_back(iovec{const_cast<std::uint8_t*>(pieces[k].data), pieces[k].size});
      write_vectors(fd, vectors, pieces[i].offset, path);
      i = j;
    }
    if (::ftruncate(fd, static_cast<off_t>(file_size_)) != 0) fs::throw_errno("ftruncate", path, errno);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) fs::throw_errno("close", path, errno);
}

StructureWritten write_file_structure(FileTemplate* reuse, const std::string& key, const std::string& path,
                                      const FileStamps& stamps, const std::vector<const void*>& data,
                                      std::uint64_t small_below,
                                      const std::function<std::vector<DatasetRange>(const FileStamps&)>& write_hdf5,
                                      std::string_view what) {
  StructureWritten out;
  if (reuse != nullptr && reuse->fits(key)) {
    out.datasets = reuse->datasets();
    std::vector<const void*> small(data.size(), nullptr);
    for (std::size_t i = 0; i < data.size() && i < out.datasets.size(); ++i)
      if (out.datasets[i].bytes < small_below) small[i] = data[i];
    reuse->create(path, stamps, small);
    out.reused = true;
    out.how = "template";
  } else if (reuse != nullptr && reuse->worth_learning(key)) {
    const FileStamps sentinels = FileTemplate::sentinels(stamps.crcs.size());
    out.datasets = write_hdf5(sentinels);
    if (reuse->learn(key, path, out.datasets, sentinels, stamps)) {
      out.how = "HDF5, learned";
    } else {
      // Not tried again for this structure: every file of it through HDF5 alone, as without a template.
      TENAX_LOG(Info, "ckpt") << path << ": the structure of this " << what << " could not be learned (a sentinel "
                              << "value was not found exactly once); its files are written by HDF5 alone";
      out.datasets = write_hdf5(stamps);
    }
  } else {
    out.datasets = write_hdf5(stamps);
  }
  return out;
}

}  // namespace tenax::ckpt
