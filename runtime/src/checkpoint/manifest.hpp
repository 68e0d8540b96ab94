// The manifest: the commit record of one checkpoint (manifest.json in its directory, format in
// docs/checkpoint-format.md). A step directory without a manifest is not a checkpoint.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/geometry.hpp"
#include "tenax/dtype.hpp"
#include "tenax/parallel_layout.hpp"

namespace tenax::ckpt {

// Version 3 checksums the manifest itself and records checkpoint.h5's size and checksum; version 2 named each block's
// dataset (a rank may write several blocks of one tensor); version 1 manifests, whose blocks are all
// "/tensors/<name>", are still read.
inline constexpr std::uint64_t kFormatVersion = 3;
inline constexpr std::uint64_t kOldestReadableVersion = 1;
inline constexpr const char* kManifestName = "manifest.json";
inline constexpr const char* kVdsName = "checkpoint.h5";
inline constexpr const char* kLatestName = "latest";

std::string rank_file_name(int rank);                   // "rank_00003.h5"
std::string tensor_dataset(const std::string& tensor);  // "/tensors/<name>"
// The dataset of a block in its rank file: tensor_dataset() when the file holds one block of the tensor, else
// "/tensors/<name>@<ordinal>" with the block's ordinal among that file's blocks of the tensor ('@' is never part of a
// tensor name, so the names cannot collide).
std::string block_dataset(const std::string& tensor, int ordinal_in_file, int blocks_in_file);
std::string blob_dataset(const std::string& blob);  // "/blobs/<name>"

struct ManifestBlock {
  int rank = 0;         // the file (rank_<rank>.h5) that holds it
  std::string dataset;  // in that file
  Box box;
  std::uint64_t bytes = 0;
  std::uint32_t crc32c = 0;
};

struct ManifestTensor {
  std::string name;
  DType dtype = DType::F32;
  Dims global_shape;
  std::vector<ManifestBlock> blocks;
};

struct ManifestBlob {
  int rank = 0;
  std::string name;
  std::uint64_t bytes = 0;
  std::uint32_t crc32c = 0;
};

struct ManifestFile {
  int rank = 0;
  std::string name;
  std::uint64_t bytes = 0;  // size after fsync: a shorter file is truncated
};

// A whole file's size and CRC32C (checkpoint.h5).
struct FileDigest {
  std::string name;
  std::uint64_t bytes = 0;
  std::uint32_t crc32c = 0;
};

// The key of the manifest's own checksum: the last member of the top-level object, the CRC32C of every byte of the
// text before the '"' that opens this key.
inline constexpr const char* kManifestChecksumKey = "manifest_crc32c";

struct Manifest {
  std::uint64_t version = kFormatVersion;
  std::uint64_t step = 0;
  ParallelLayout layout;
  int world_size = 0;
  std::vector<ManifestFile> files;      // one per saving rank, by rank
  std::vector<ManifestTensor> tensors;  // sorted by name
  std::vector<ManifestBlob> blobs;
  std::optional<FileDigest> vds;  // checkpoint.h5 (version 3)
  // A node-local copy of one rank's state (local_tier.hpp): one file, and its tensors' blocks are the ones that rank
  // holds, which need not cover the whole tensors ("scope": "rank" in the JSON; absent: the whole model).
  bool rank_scoped = false;

  // The text of manifest.json, ending with its own checksum (version 3).
  std::string to_json() const;
  // Parses and validates a manifest read from disk, which may be damaged or hostile. Throws std::runtime_error
  // (naming what is wrong) unless: the JSON is well formed and of a known version; its checksum matches (version 3);
  // every rank is inside the saved world and every file name is exactly its rank's rank_<r>.h5; tensor and blob
  // names are valid and unique; every block lies inside its tensor, has the byte size its shape implies, names one of
  // its tensor's datasets, and the blocks of each tensor tile it exactly once (no overlap, nothing uncovered; a
  // rank-scoped manifest lists exactly one file and its blocks only must not overlap).
  static Manifest from_json(std::string_view text);
  const ManifestTensor* find(const std::string& name) const;
};

}  // namespace tenax::ckpt
