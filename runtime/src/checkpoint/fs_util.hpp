// The POSIX file-system steps of the commit protocol, each raising IoError with the path and the system's error text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tenax/error.hpp"

namespace tenax::ckpt::fs {

// A failed system call on a path: an IoError that keeps errno, so callers can tell a directory the user must change
// (EACCES, EROFS, ...) from a failing device.
class FsError : public IoError {
 public:
  FsError(const std::string& what, int err) : IoError(what), errno_(err) {}
  int error_number() const { return errno_; }

 private:
  int errno_;
};

// Throws FsError("<what> <path>: <strerror(err)> (errno <err>)").
[[noreturn]] void throw_errno(std::string_view what, const std::string& path, int err);

// mkdir -p; fails with IoError if a component exists and is not a directory or cannot be created.
void make_dirs(const std::string& path);
// fsync of a file or a directory (a directory's fsync makes the names inside it durable).
void fsync_path(const std::string& path);
// Creates `path` (which must not exist), writes `contents`, fsyncs and closes it.
void write_file_durable(const std::string& path, std::string_view contents);
std::string read_file(const std::string& path);
// rename(2): atomic replacement of the destination name.
void rename_path(const std::string& from, const std::string& to);
// Removes a file or a directory tree; a missing path is not an error.
void remove_tree(const std::string& path);
bool exists(const std::string& path);
bool is_directory(const std::string& path);
std::uint64_t file_size(const std::string& path);
std::string parent_of(const std::string& path);
std::string join(const std::string& dir, std::string_view name);

}  // namespace tenax::ckpt::fs
