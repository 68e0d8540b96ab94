// Writes the bulk of a rank file's tensor bytes from the staging buffer to the storage device, around the page cache.
//
// A buffered write of a checkpoint copies every byte into the page cache on the I/O thread, then the kernel writes it
// back: a memory-bandwidth-hungry copy and page-cache churn that compete with the training thread on the same node
// (docs/benchmarks.md compares both). With O_DIRECT the device reads the staging buffer itself. The staging buffer
// is page-aligned and each block starts on a 4 KiB boundary, and the rank file aligns its large datasets to 4 KiB
// (shard_file.cpp), so whole 4 KiB pages go direct; a block's last partial page goes through the page cache.
//
// Where the file system refuses O_DIRECT (EINVAL at open: some FUSE and older tmpfs), everything is written buffered
// in 16 MiB slices, each followed by sync_file_range(SYNC_FILE_RANGE_WRITE) so that writeback starts while the next
// slice is copied. Either way durability comes from the fsync in sync_and_close().
#pragma once

#include <cstdint>
#include <string>

namespace tenax::ckpt {

class RawDataWriter {
 public:
  // Opens an existing file for writing (direct: try O_DIRECT). Throws IoError naming the path and the system error.
  RawDataWriter(const std::string& path, bool direct);
  ~RawDataWriter();  // closes without fsync (the error path: the file is about to be removed)
  RawDataWriter(const RawDataWriter&) = delete;
  RawDataWriter& operator=(const RawDataWriter&) = delete;

  // Writes `bytes` bytes at `offset`. Throws IoError with the path, offset and system error (ENOSPC, EIO, ...).
  void write(std::uint64_t offset, const std::uint8_t* data, std::uint64_t bytes);
  // fsync (data and the metadata HDF5 wrote before), then close. Throws IoError on failure.
  void sync_and_close();

  // Whether the file system took O_DIRECT (stays valid after sync_and_close()).
  bool direct() const { return direct_; }
  std::uint64_t direct_bytes() const { return direct_bytes_; }

  static constexpr std::uint64_t kAlignment = 4096;

 private:
  void write_fd(int fd, std::uint64_t offset, const std::uint8_t* data, std::uint64_t bytes, bool start_writeback);

  std::string path_;
  int direct_fd_ = -1;    // O_DIRECT; -1 when the file system refuses it
  int buffered_fd_ = -1;  // everything else
  bool direct_ = false;
  std::uint64_t direct_bytes_ = 0;
};

}  // namespace tenax::ckpt
