// Scratch directories shared by all ranks of a checkpoint test (rank 0 creates and removes them).
#pragma once

#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "checkpoint/agreement.hpp"
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
    path_ = ckpt::broadcast_string(comm, made, 0);
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
  SmallTmpfs(Communicator& comm, const std::string& dir, std::uint64_t bytes) : comm_(comm), dir_(dir) {
    std::string error;
    if (comm.rank() == 0) {
      std::filesystem::create_directories(dir);
      std::string options = "size=" + std::to_string(bytes);
      if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) == 0)
        mounted_ = true;
      else
        error = std::string("mount -t tmpfs -o ") + options + " tmpfs " + dir + ": " + std::strerror(errno);
    }
    error_ = ckpt::broadcast_string(comm, error, 0);
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

}  // namespace tenax::test
