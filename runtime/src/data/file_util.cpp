#include "data/file_util.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "checkpoint/fs_util.hpp"
#include "tenax/error.hpp"

namespace tenax::data {

bool rename_no_replace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
  const int err = errno;
  if (err == EEXIST || err == ENOTEMPTY) return false;
  if (err != EINVAL && err != ENOSYS) ckpt::fs::throw_errno("rename " + from + " to", to, err);
  // The file system cannot do RENAME_NOREPLACE (some network file systems).
  struct stat st {};
  if (::lstat(to.c_str(), &st) == 0) return false;
  if (::rename(from.c_str(), to.c_str()) != 0) {
    if (errno == EEXIST || errno == ENOTEMPTY) return false;
    ckpt::fs::throw_errno("rename " + from + " to", to, errno);
  }
  return true;
}

void read_exact(int fd, void* out, std::size_t size, std::uint64_t offset, const std::string& path) {
  auto* p = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ckpt::fs::throw_errno("read", path, errno);
    if (n == 0) throw IoError("read " + path + ": the file ends early (truncated?) at byte " + std::to_string(offset));
    p += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

}  // namespace tenax::data
