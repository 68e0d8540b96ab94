// A checkpoint's HDF5 file written again without HDF5: the bytes HDF5 wrote around the datasets, learned once, with
// the values that change from one checkpoint to the next patched in. Used by write_rank_file (shard_file.hpp) and
// write_vds_file (vds_file.hpp, where the step is the only such value and no dataset has storage); I/O thread only.
//
// Why: a rank file holds a dataset per block with five attributes each, and a model has hundreds of blocks per rank.
// Creating them through HDF5 cost 60-90 us per block on the I/O thread (25-37 ms for 400 blocks), on every checkpoint,
// for a structure that is the same every time: only the step (a file attribute) and each block's CRC32C (a dataset
// attribute) change, besides the data. HDF5 has no interface that says where it stores an attribute's value, so the
// template learns it: the second file of a structure (the structure of the file before it too) is written through
// HDF5 with random sentinel values in those places, its bytes outside the datasets are read back, and each sentinel
// must be found exactly once in them (else that structure is never tried again: its files go through HDF5, as
// before). Later files with the same structure are those bytes with the real values patched in, and the data written
// at the datasets' offsets; the result is byte for byte the file HDF5 writes for the same values
// (tests/checkpoint/file_template_test.cpp), so readers see no difference. The sentinels are found by their
// little-endian bytes: a little-endian host (static_assert), as the files' attributes are little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tenax::ckpt {

// A dataset's place in the file: where its bytes start and how many (0 bytes: no storage).
struct DatasetRange {
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

// The values that differ between two files of one structure.
struct FileStamps {
  std::uint64_t step = 0;
  std::vector<std::uint32_t> crcs;  // one per dataset, in the order the file's datasets were created (none: VDS)
};

class FileTemplate {
 public:
  // Stamps to learn a structure with: a random step and `datasets` distinct random CRCs (learn() then requires each
  // to occur exactly once in the file's bytes).
  static FileStamps sentinels(std::size_t datasets);

  // Whether the template was learned for this structure: the writer's description of everything the file's
  // structure depends on (write_rank_file: the header, the blocks and their shapes, the blobs and their sizes;
  // write_vds_file: the tensors and their blocks).
  bool fits(const std::string& key) const { return usable_ && key == key_; }

  // Whether to learn the structure `key` now: one the previous call saw too, and whose learning never failed.
  // Learning costs a second pass over the file: a structure that changes from one checkpoint to the next (a blob of
  // varying size) would pay it every time and never use it.
  bool worth_learning(const std::string& key);

  // Learns the structure of the file at `path`, just written by HDF5 with `sentinels` (the datasets' bytes not yet
  // written): reads everything outside `datasets`, finds each sentinel, and rewrites those places with `stamps`. False
  // when a sentinel is not found exactly once: the template then fits nothing and the file keeps its sentinels (the
  // caller writes it again). IoError when the file cannot be read or written.
  bool learn(const std::string& key, const std::string& path, const std::vector<DatasetRange>& datasets,
             const FileStamps& sentinels, const FileStamps& stamps);

  // Writes `path` (an empty file the caller created) with the learned bytes stamped with `stamps`, and the bytes of
  // the datasets that `small` gives (data[i] for dataset i, nullptr: not written here), in as few writes as the
  // file's layout allows, and gives it its full size (what is not written stays a hole); closes it. The caller writes
  // the other datasets and syncs. Throws IoError naming the path.
  void create(const std::string& path, const FileStamps& stamps, const std::vector<const void*>& small) const;

  std::uint64_t file_size() const { return file_size_; }
  const std::vector<DatasetRange>& datasets() const { return datasets_; }

 private:
  struct Run {
    std::uint64_t offset;  // in the file
    std::uint64_t at;      // in bytes_
    std::uint64_t size;
  };
  bool learn_from(int fd, const std::string& path, const FileStamps& sentinels);
  void stamp(int fd, const std::string& path, const FileStamps& stamps) const;
  std::vector<std::uint8_t> stamped(const FileStamps& stamps) const;

  bool usable_ = false;
  std::string key_;
  std::string last_seen_;  // the structure of the previous worth_learning() call
  std::string failed_;     // a structure whose learning failed: never tried again
  std::uint64_t file_size_ = 0;
  std::vector<DatasetRange> datasets_;
  std::vector<Run> runs_;              // the file's bytes outside the datasets, in file order
  std::vector<std::uint8_t> bytes_;    // their contents, run after run
  std::uint64_t step_at_ = 0;          // where in bytes_ the step's 8 bytes lie
  std::vector<std::uint64_t> crc_at_;  // where in bytes_ each dataset's CRC's 4 bytes lie
};

// What write_file_structure wrote.
struct StructureWritten {
  std::vector<DatasetRange> datasets;  // where each dataset's bytes go
  bool reused = false;                 // from the template, the datasets below `small_below` bytes with it
  const char* how = "HDF5";            // for the log: "HDF5", "HDF5, learned" or "template"
};

// The one way a checkpoint file's structure is written (write_rank_file, write_vds_file), into `path` (an empty file
// the caller created): from `reuse` when it fits `key`, with the datasets of fewer than `small_below` bytes written
// from `data` (data[i] for dataset i); else by `write_hdf5(stamps)`, which writes the file with HDF5 with those
// stamps and returns the datasets' ranges, learning the structure on the way when it is worth it. `reuse` nullptr:
// HDF5 alone. `what` names the kind of file in the log line of a structure that could not be learned.
StructureWritten write_file_structure(FileTemplate* reuse, const std::string& key, const std::string& path,
                                      const FileStamps& stamps, const std::vector<const void*>& data,
                                      std::uint64_t small_below,
                                      const std::function<std::vector<DatasetRange>(const FileStamps&)>& write_hdf5,
                                      std::string_view what);

}  // namespace tenax::ckpt
