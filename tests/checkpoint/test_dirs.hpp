// Scratch directories shared by all ranks of a checkpoint test (rank 0 creates and removes them).
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "comm/agreement.hpp"
#include "tenax/communicator.hpp"

namespace tenax::test {

class SharedTempDir {
 public:
  explicit SharedTempDir(Communicator& comm, const std::string& tag) : comm_(comm) {
    std::string made;
    if (comm.rank() == 0) {
      std::string templ = "/tmp/tenax-ckpt-" + tag + "-XXXXXX";
      if (::mkdtemp(templ.data())) made = templ;
    }
    path_ = broadcast_string(comm, made, 0);
  }
  ~SharedTempDir() {
    comm_.barrier();
    if (comm_.rank() == 0 && !path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  Communicator& comm_;
  std::string path_;
};

// A small tmpfs mounted by rank 0 (root only); unmounted on destruction whatever happened in between.
class SmallTmpfs {
 public:
  SmallTmpfs(Communicator& comm, const std::string& dir, std::uint64_t bytes, bool read_only = false)
      : comm_(comm), dir_(dir) {
    std::string error;
    if (comm.rank() == 0) {
      std::filesystem::create_directories(dir);
      std::string options = "size=" + std::to_string(bytes);
      if (::mount("tmpfs", dir.c_str(), "tmpfs", read_only ? MS_RDONLY : 0, options.c_str()) == 0)
        mounted_ = true;
      else
        error = std::string("mount -t tmpfs -o ") + options + " tmpfs " + dir + ": " + std::strerror(errno);
    }
    error_ = broadcast_string(comm, error, 0);
  }
  ~SmallTmpfs() {
    comm_.barrier();
    if (mounted_ && ::umount2(dir_.c_str(), MNT_DETACH) != 0)
      std::fprintf(stderr, "could not unmount %s: %s\n", dir_.c_str(), std::strerror(errno));
  }
  // Empty when mounted; otherwise why not (the same text on every rank).
  const std::string& error() const { return error_; }

 private:
  Communicator& comm_;
  std::string dir_;
  bool mounted_ = false;
  std::string error_;
};

// Writes `path` until the file system is full (ENOSPC), then gives back `leave_free` bytes; returns the file's size.
inline std::uint64_t fill_file_system(const std::string& path, std::uint64_t leave_free = 0) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 0;
  std::vector<char> block(1 << 16, 'x');
  std::uint64_t total = 0;
  for (std::size_t chunk = block.size(); chunk > 0;) {
    const ssize_t n = ::write(fd, block.data(), chunk);
    if (n > 0) {
      total += static_cast<std::uint64_t>(n);
    } else {
      chunk /= 2;  // fill the last partial block too
    }
  }
  total = total > leave_free ? total - leave_free : 0;
  if (::ftruncate(fd, static_cast<off_t>(total)) != 0) total = 0;
  ::fsync(fd);
  ::close(fd);
  return total;
}

}  // namespace tenax::test
