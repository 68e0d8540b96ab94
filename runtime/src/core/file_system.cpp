#include "core/file_system.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "tenax/error.hpp"

namespace tenax::fs {
namespace {

// The one place that retries a system call interrupted by a signal (EINTR): every open and fsync here goes through
// these two.
int open_retrying(const std::string& path, int flags, mode_t mode) {
  int fd;
  do
    fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  while (fd < 0 && errno == EINTR);
  return fd;
}

int fsync_retrying(int fd) {
  int rc;
  do
    rc = ::fsync(fd);
  while (rc != 0 && errno == EINTR);
  return rc;
}

}  // namespace

int open_file(const std::string& path, int flags, mode_t mode) {
  const int fd = open_retrying(path, flags, mode);
  if (fd < 0) throw_errno((flags & O_CREAT) != 0 ? "create" : "open", path, errno);
  return fd;
}

void fsync_fd(int fd, const std::string& path) {
  if (fsync_retrying(fd) != 0) throw_errno("fsync", path, errno);
}

void pwrite_all(int fd, const void* data, std::size_t size, std::uint64_t offset, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("write at byte " + std::to_string(offset) + " of", path, errno);
    if (n == 0) throw_errno("write (no progress) at byte " + std::to_string(offset) + " of", path, ENOSPC);
    p += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

void throw_errno(std::string_view what, const std::string& path, int err) {
  throw FsError(std::string(what) + " " + path + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")",
                err);
}

void make_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw_errno("create directory", path, ec.value());
  if (!is_directory(path)) throw_errno("create directory", path, ENOTDIR);
}

void fsync_path(const std::string& path) {
  const int fd = open_retrying(path, O_RDONLY, 0);
  if (fd < 0) throw_errno("open for fsync", path, errno);
  const int rc = fsync_retrying(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw_errno("fsync", path, err);
}

void write_file_durable(const std::string& path, std::string_view contents) {
  const int fd = open_file(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
  try {
    write_all(fd, contents, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  int rc = fsync_retrying(fd);
  int err = errno;
  if (::close(fd) != 0 && rc == 0) {
    rc = -1;
    err = errno;
  }
  if (rc != 0) throw_errno("fsync", path, err);
}

void write_all(int fd, std::string_view data, const std::string& path) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("write", path, errno);
    done += static_cast<std::size_t>(n);
  }
}

void read_exact(int fd, void* out, std::size_t size, std::uint64_t offset, const std::string& path) {
  auto* p = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("read", path, errno);
    if (n == 0) throw IoError("read " + path + ": the file ends early (truncated?) at byte " + std::to_string(offset));
    p += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

void replace_file_atomically(const std::string& path, std::string_view contents, Durability durability) {
  // The process id keeps two writers of one file (two attempts of a rank, say) off each other's temporary.
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const int fd = open_file(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int err = 0;
  std::string step;
  try {
    write_all(fd, contents, temporary);
  } catch (const FsError& e) {
    err = e.error_number();
    step = "write";
  }
  if (err == 0 && durability != Durability::None) {
    if (fsync_retrying(fd) != 0) {
      err = errno;
      step = "fsync";
    }
  }
  if (::close(fd) != 0 && err == 0) {
    err = errno;
    step = "close";
  }
  if (err == 0 && ::rename(temporary.c_str(), path.c_str()) != 0) {
    err = errno;
    step = "rename " + temporary + " to";
  }
  if (err != 0) {
    ::unlink(temporary.c_str());
    throw_errno(step, step == "write" || step == "fsync" || step == "close" ? temporary : path, err);
  }
  if (durability == Durability::ContentsAndName) fsync_path(parent_of(path));
}

bool rename_no_replace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
  const int err = errno;
  if (err == EEXIST || err == ENOTEMPTY) return false;
  if (err != EINVAL && err != ENOSYS) throw_errno("rename " + from + " to", to, err);
  // The file system cannot do RENAME_NOREPLACE (some network file systems).
  struct stat st {};
  if (::lstat(to.c_str(), &st) == 0) return false;
  if (::rename(from.c_str(), to.c_str()) != 0) {
    if (errno == EEXIST || errno == ENOTEMPTY) return false;
    throw_errno("rename " + from + " to", to, errno);
  }
  return true;
}

std::string read_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO put where a file belongs must not wait for a writer forever (it is refused below).
  const int fd = open_file(path, O_RDONLY | O_NONBLOCK);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IoError(path + " is not a regular file");
  }
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw_errno("read", path, err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

void rename_path(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) throw_errno("rename " + from + " to", to, errno);
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) throw_errno("remove", path, ec.value());
}

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::uint64_t file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw_errno("stat", path, errno);
  return static_cast<std::uint64_t>(st.st_size);
}

std::string parent_of(const std::string& path) {
  std::filesystem::path p(path);
  std::filesystem::path parent = p.parent_path();
  return parent.empty() ? "." : parent.string();
}

std::string join(const std::string& dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  if (dir.back() == '/') return dir + std::string(name);
  return dir + "/" + std::string(name);
}

}  // namespace tenax::fs
