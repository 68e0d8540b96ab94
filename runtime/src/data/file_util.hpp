// Internal: file-system steps of the data part that the checkpoint's fs helpers (checkpoint/fs_util.hpp) lack.
#pragma once

#include <cstdint>
#include <string>

namespace tenax::data {

// Renames `from` to `to` unless `to` exists: true when renamed, false when `to` exists (left alone). Uses
// renameat2(RENAME_NOREPLACE) where the file system has it, else a check before rename(2) (a narrow race, on file
// systems without it). Throws FsError for other failures.
bool rename_no_replace(const std::string& from, const std::string& to);

// Reads exactly `size` bytes at `offset` of `fd` (retrying short reads); throws IoError naming `path` when the file
// ends early or read(2) fails.
void read_exact(int fd, void* out, std::size_t size, std::uint64_t offset, const std::string& path);

}  // namespace tenax::data
