// The POSIX file steps every part of tenax uses (checkpoint commits, dataset shards and staging, run files, heartbeats,
// the launcher's ledger and node lists), written once: each retries EINTR and short transfers and raises FsError
// (an IoError) naming the step, the path and the system's error text. MPI-free: part of tenax_core.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "tenax/error.hpp"

namespace tenax::fs {

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
// The whole content of a regular file; anything else (a FIFO, a device, a directory) is an IoError, not waited on.
std::string read_file(const std::string& path);

// open(2) with O_CLOEXEC added, retried on EINTR; throws FsError ("create" or "open" <path>) on failure.
int open_file(const std::string& path, int flags, mode_t mode = 0);
// fsync(2), retried on EINTR; throws FsError naming `path`.
void fsync_fd(int fd, const std::string& path);
// Writes all of `data` at `offset` of `fd` (retrying EINTR and short writes; no progress is ENOSPC).
void pwrite_all(int fd, const void* data, std::size_t size, std::uint64_t offset, const std::string& path);
// Writes all of `data` to `fd` at its current offset (retrying EINTR and short writes); `path` names it in errors.
void write_all(int fd, std::string_view data, const std::string& path);
// Reads exactly `size` bytes at `offset` of `fd` (retrying short reads); throws IoError naming `path` when the file
// ends early or read(2) fails.
void read_exact(int fd, void* out, std::size_t size, std::uint64_t offset, const std::string& path);

// How much of a replacement survives a crash of the machine: nothing promised (files a later writer rewrites anyway,
// such as heartbeats), the file's contents, or the contents and the new name (a file a restart depends on).
enum class Durability { None, Contents, ContentsAndName };
// Replaces `path` with `contents` in one step: a reader sees the old file or the new one, never a part of it (a
// temporary beside it, then rename(2)). On failure the temporary is removed and `path` is unchanged.
void replace_file_atomically(const std::string& path, std::string_view contents, Durability durability);
// Renames `from` to `to` unless `to` exists: true when renamed, false when `to` exists (left alone). Uses
// renameat2(RENAME_NOREPLACE) where the file system has it, else a check before rename(2) (a narrow race, on file
// systems without it).
bool rename_no_replace(const std::string& from, const std::string& to);
// rename(2): atomic replacement of the destination name.
void rename_path(const std::string& from, const std::string& to);
// Removes a file or a directory tree; a missing path is not an error.
void remove_tree(const std::string& path);
bool exists(const std::string& path);
bool is_directory(const std::string& path);
std::uint64_t file_size(const std::string& path);
std::string parent_of(const std::string& path);
std::string join(const std::string& dir, std::string_view name);

}  // namespace tenax::fs
