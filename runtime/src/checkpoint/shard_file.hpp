// One rank's HDF5 file of a checkpoint (rank_<r>.h5): its blocks under /tensors/<name>, each with its global shape,
// offset, dtype and CRC32C as attributes, and its blobs under /blobs/<name>. Called on the I/O thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/file_template.hpp"
#include "checkpoint/geometry.hpp"
#include "checkpoint/hdf5_util.hpp"
#include "tenax/dtype.hpp"
#include "tenax/parallel_layout.hpp"

namespace tenax::ckpt {

struct ShardWrite {
  std::string tensor;
  std::string dataset;  // where in the file (block_dataset())
  DType dtype = DType::F32;
  Dims global_shape;
  Box box;
  const void* data = nullptr;  // staged bytes, row-major
  std::uint32_t crc32c = 0;
};

struct BlobWrite {
  std::string name;
  const std::vector<std::uint8_t>* bytes = nullptr;
  std::uint32_t crc32c = 0;
};

struct RankFileHeader {
  std::uint64_t step = 0;
  int rank = 0;
  int world_size = 0;
  ParallelLayout layout;
};

struct RankFileWritten {
  std::uint64_t file_bytes = 0;    // the file's size
  std::uint64_t direct_bytes = 0;  // of the large datasets' bytes, those written with O_DIRECT
  bool structure_reused = false;   // written from a learned structure, without HDF5
};

// Creates `path` (it must not exist), writes everything, closes, fsyncs it, and returns its size and how much of it
// went around the page cache. HDF5 writes the structure and the attributes; the datasets' bytes go through
// RawDataWriter (direct_io: the large ones around the page cache where the file system allows). With `reuse` (one per
// kind of file a caller writes again and again, kept by the caller) the structure is learned once it repeats (from the
// second file) and later files of the same structure are written from it without HDF5 (file_template.hpp): the same
// bytes. An existing `path` is refused (IoError) and left as it is; on any other failure the partial file is removed
// and IoError is raised with the path and the system's error text.
RankFileWritten write_rank_file(const std::string& path, const RankFileHeader& header,
                                const std::vector<ShardWrite>& shards, const std::vector<BlobWrite>& blobs,
                                bool direct_io, FileTemplate* reuse = nullptr);

// What a block's dataset says about itself (its attributes and its shape), to cross-check with the manifest.
struct BlockAttributes {
  std::string tensor;
  std::string dtype;
  Dims global_shape;
  Dims offset;
  Dims shape;
  std::uint32_t crc32c = 0;
};

class RankFileReader {
 public:
  explicit RankFileReader(const std::string& path);
  const std::string& path() const { return path_; }

  // One dataset of the file, opened once for both its attributes and its data: a load checks every block's
  // attributes against the manifest before reading it, and a model has hundreds of blocks.
  class Block {
   public:
    // The dataset's attributes and shape. Raises IoError naming the file and dataset when one is missing or malformed.
    BlockAttributes attributes() const;
    // Reads the dataset (which must have block_shape) into a row-major buffer of dst_shape, the block landing at
    // dst_start. Raises IoError naming the file and dataset on any mismatch or read failure.
    void read(DType dtype, const Dims& block_shape, void* dst, const Dims& dst_shape, const Dims& dst_start) const;

   private:
    friend class RankFileReader;
    Block(std::string where, h5::Handle dataset) : where_(std::move(where)), dataset_(std::move(dataset)) {}
    std::string where_;  // "<file> dataset <name>", for errors
    h5::Handle dataset_;
  };
  // Raises IoError naming the file and dataset when it cannot be opened.
  Block open(const std::string& dataset);

  // open(dataset).read(...).
  void read_block(const std::string& dataset, DType dtype, const Dims& block_shape, void* dst, const Dims& dst_shape,
                  const Dims& dst_start);
  std::vector<std::uint8_t> read_bytes(const std::string& dataset, std::uint64_t expected_size);

 private:
  std::string path_;
  h5::Handle file_;
};

}  // namespace tenax::ckpt
