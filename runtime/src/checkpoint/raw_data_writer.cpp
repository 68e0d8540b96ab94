#include "checkpoint/raw_data_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/file_system.hpp"
#include "tenax/error.hpp"

namespace tenax::ckpt {
namespace {

// Large enough that per-call costs vanish and a direct write keeps the device busy, small enough that buffered
// writeback starts early.
constexpr std::uint64_t kSlice = std::uint64_t{16} << 20;

int open_retrying(const std::string& path, int flags) {
  int fd;
  do
    fd = ::open(path.c_str(), flags | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  return fd;
}

bool aligned(std::uint64_t v) {
  return v % RawDataWriter::kAlignment == 0;
}

}  // namespace

RawDataWriter::RawDataWriter(const std::string& path, bool direct) : path_(path) {
  buffered_fd_ = open_retrying(path, O_WRONLY);
  if (buffered_fd_ < 0) fs::throw_errno("open for writing", path, errno);
  // EINVAL: not supported here; the buffered path then does it all.
  if (direct) direct_fd_ = open_retrying(path, O_WRONLY | O_DIRECT);
  direct_ = direct_fd_ >= 0;
}

RawDataWriter::~RawDataWriter() {
  if (direct_fd_ >= 0) ::close(direct_fd_);
  if (buffered_fd_ >= 0) ::close(buffered_fd_);
}

void RawDataWriter::write_fd(int fd, std::uint64_t offset, const std::uint8_t* data, std::uint64_t bytes,
                             bool start_writeback) {
  for (std::uint64_t done = 0; done < bytes;) {
    const std::uint64_t n = std::min(kSlice, bytes - done);
    const ssize_t w = ::pwrite(fd, data + done, n, static_cast<off_t>(offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0)
      fs::throw_errno("write of " + std::to_string(n) + " bytes at offset " + std::to_string(offset + done) + " to",
                      path_, errno);
    // A short write is what a full device does to a buffered write; the retry then reports the errno.
    done += static_cast<std::uint64_t>(w);
    if (w == 0) fs::throw_errno("write (no progress) to", path_, ENOSPC);
    if (start_writeback)
      ::sync_file_range(fd, static_cast<off_t>(offset + done - static_cast<std::uint64_t>(w)), w,
                        SYNC_FILE_RANGE_WRITE);
  }
}

void RawDataWriter::write(std::uint64_t offset, const std::uint8_t* data, std::uint64_t bytes) {
  std::uint64_t direct_part = 0;
  if (direct_fd_ >= 0 && aligned(offset) && aligned(reinterpret_cast<std::uintptr_t>(data)))
    direct_part = bytes / kAlignment * kAlignment;
  if (direct_part > 0) {
    write_fd(direct_fd_, offset, data, direct_part, /*start_writeback=*/false);
    direct_bytes_ += direct_part;
  }
  if (direct_part < bytes)
    write_fd(buffered_fd_, offset + direct_part, data + direct_part, bytes - direct_part, /*start_writeback=*/true);
}

void RawDataWriter::sync_and_close() {
  fs::fsync_fd(buffered_fd_, path_);
  if (direct_fd_ >= 0 && ::close(direct_fd_) != 0) {
    direct_fd_ = -1;
    fs::throw_errno("close", path_, errno);
  }
  direct_fd_ = -1;
  const int fd = buffered_fd_;
  buffered_fd_ = -1;
  if (::close(fd) != 0) fs::throw_errno("close", path_, errno);
}

}  // namespace tenax::ckpt
