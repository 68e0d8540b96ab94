// An owned file descriptor: closed when its owner goes, so that no path out of a function (an early return, an
// exception) leaks it. Header-only and free of other tenax code, because the node-local cleanup library, which
// tenax-launch and the SPANK plugin link without tenax_core, uses it too.
//
// The destructor ignores close(2)'s result: by then the data either matters and was fsynced (and the caller closed
// it explicitly with release() to see a failure), or the descriptor was only read. Constructing one never changes
// errno, so a caller may test get() < 0 and then read the errno of the open that produced it.
#pragma once

#include <unistd.h>

#include <utility>

namespace tenax {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives the descriptor up without closing it (to a caller that closes it and checks the result, or to fdopendir).
  int release() { return std::exchange(fd_, -1); }
  // Closes the descriptor held, if any, and holds `fd` instead.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace tenax
