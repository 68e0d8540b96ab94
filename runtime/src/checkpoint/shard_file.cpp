#include "checkpoint/shard_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "checkpoint/manifest.hpp"
#include "checkpoint/raw_data_writer.hpp"
#include "core/file_system.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"

namespace tenax::ckpt {
namespace {

// Datasets of at least this many bytes are aligned to 4 KiB in the file and written by RawDataWriter (direct I/O);
// smaller ones (biases, blobs) through the page cache, with the structure's bytes when those come from a template.
// The alignment wastes at most 4 KiB per large dataset.
constexpr std::uint64_t kDirectThreshold = std::uint64_t{64} << 10;

// The property lists of a file's datasets, made once per file. Contiguous and allocated at creation, so that each
// dataset's offset is known and its bytes are written outside HDF5, straight from the staging buffer; no fill values
// (each block is written exactly once); no modification times, so that a file is a function of its contents (the
// template, file_template.hpp, relies on it).
struct DatasetCreation {
  h5::Handle lcpl;  // intermediate groups created
  h5::Handle dcpl;

  explicit DatasetCreation(const std::string& path)
      : lcpl(h5::lcpl_with_parents()), dcpl(h5::check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate", path), H5Pclose) {
    h5::check(H5Pset_layout(dcpl, H5D_CONTIGUOUS), "H5Pset_layout", path);
    h5::check(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), "H5Pset_fill_time", path);
    h5::check(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY), "H5Pset_alloc_time", path);
    h5::check(H5Pset_obj_track_times(dcpl, false), "H5Pset_obj_track_times", path);
  }
};

// Creates a dataset and returns it and where its bytes go (none for an empty one).
std::pair<h5::Handle, DatasetRange> add_dataset(hid_t file, const DatasetCreation& lists, const std::string& name,
                                                hid_t type, const Dims& dims, const std::string& path) {
  const std::uint64_t bytes = volume(dims) * H5Tget_size(type);
  h5::Handle space = h5::dataspace(dims);
  h5::Handle dset(h5::check(H5Dcreate2(file, name.c_str(), type, space, lists.lcpl, lists.dcpl, H5P_DEFAULT),
                            ("H5Dcreate2 " + name).c_str(), path),
                  H5Dclose);
  if (bytes == 0) return {std::move(dset), DatasetRange{}};
  const haddr_t at = H5Dget_offset(dset);
  if (at == HADDR_UNDEF) throw IoError(path + ": HDF5 did not allocate dataset " + name + " at creation");
  return {std::move(dset), DatasetRange{static_cast<std::uint64_t>(at), bytes}};
}

// Writes the file's structure and attributes with HDF5, `stamps` as the step and the CRCs; returns where each
// dataset's bytes go (the shards', then the blobs'), not yet written.
std::vector<DatasetRange> write_structure(const std::string& path, const RankFileHeader& header,
                                          const std::vector<ShardWrite>& shards, const std::vector<BlobWrite>& blobs,
                                          const FileStamps& stamps) {
  std::vector<DatasetRange> ranges;
  h5::Handle fapl(h5::check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate", path), H5Pclose);
  h5::check(H5Pset_alignment(fapl, kDirectThreshold, RawDataWriter::kAlignment), "H5Pset_alignment", path);
  h5::Handle file = h5::file_create(path, fapl);
  const DatasetCreation lists(path);
  h5::write_attr_u64(file, "tenax_format_version", kFormatVersion, path);
  h5::write_attr_u64(file, "step", stamps.step, path);
  h5::write_attr_u64(file, "rank", static_cast<std::uint64_t>(header.rank), path);
  h5::write_attr_u64(file, "world_size", static_cast<std::uint64_t>(header.world_size), path);
  h5::write_attr_u64s(file, "layout_tp_pp_dp",
                      {static_cast<std::uint64_t>(header.layout.tp), static_cast<std::uint64_t>(header.layout.pp),
                       static_cast<std::uint64_t>(header.layout.dp)},
                      path);
  std::size_t i = 0;
  for (const ShardWrite& s : shards) {
    h5::Handle type = h5::type_of(s.dtype);
    auto [dset, range] = add_dataset(file, lists, s.dataset, type, s.box.shape, path);
    ranges.push_back(range);
    h5::write_attr_string(dset, "tensor", s.tensor, path);
    h5::write_attr_string(dset, "dtype", std::string(dtype_name(s.dtype)), path);
    h5::write_attr_u64s(dset, "global_shape", s.global_shape, path);
    h5::write_attr_u64s(dset, "offset", s.box.offset, path);
    h5::write_attr_u32(dset, "crc32c", stamps.crcs[i++], path);
  }
  h5::Handle u8 = h5::type_of(DType::U8);
  for (const BlobWrite& b : blobs) {
    auto [dset, range] = add_dataset(file, lists, blob_dataset(b.name), u8, {b.bytes->size()}, path);
    ranges.push_back(range);
    h5::write_attr_u32(dset, "crc32c", stamps.crcs[i++], path);
  }
  // Closing writes the metadata and sets the file's size to cover the allocated datasets; a failure here (ENOSPC)
  // must not go unnoticed.
  h5::check(file.close(), "H5Fclose", path);
  return ranges;
}

// Everything the structure of a file depends on: a template fits a file whose description is the same.
std::string structure_key(const RankFileHeader& header, const std::vector<ShardWrite>& shards,
                          const std::vector<BlobWrite>& blobs) {
  std::string key = std::to_string(header.rank) + " " + std::to_string(header.world_size) + " " +
                    std::to_string(header.layout.tp) + " " + std::to_string(header.layout.pp) + " " +
                    std::to_string(header.layout.dp) + "\n";
  for (const ShardWrite& s : shards)
    key += s.dataset + " " + s.tensor + " " + std::string(dtype_name(s.dtype)) + " " + dims_string(s.global_shape) +
           " " + dims_string(s.box.offset) + " " + dims_string(s.box.shape) + "\n";
  for (const BlobWrite& b : blobs)
    key += "blob " + b.name + " " + std::to_string(b.bytes->size()) + "\n";
  return key;
}

}  // namespace

RankFileWritten write_rank_file(const std::string& path, const RankFileHeader& header,
                                const std::vector<ShardWrite>& shards, const std::vector<BlobWrite>& blobs,
                                bool direct_io, FileTemplate* reuse) {
  using Clock = std::chrono::steady_clock;
  FileStamps stamps{header.step, {}};
  std::vector<const void*> data;
  for (const ShardWrite& s : shards) {
    stamps.crcs.push_back(s.crc32c);
    data.push_back(s.data);
  }
  for (const BlobWrite& b : blobs) {
    stamps.crcs.push_back(b.crc32c);
    data.push_back(b.bytes->data());
  }
  // The name is claimed first (an existing file is refused, and left as it is): the clean-up below removes only what
  // this call created.
  try {
    if (::close(fs::open_file(path, O_WRONLY | O_CREAT | O_EXCL, 0666)) != 0) fs::throw_errno("close", path, errno);
  } catch (const fs::FsError& e) {
    if (e.error_number() != EEXIST) throw;
    // A run removes its own unfinished saves when it starts, so the file is another writer's, saving the same step
    // into the same directory now.
    throw IoError(std::string(e.what()) + ": another program (or another Engine in this one) is saving step " +
                  std::to_string(header.step) +
                  " into the same checkpoint directory; give each run a checkpoint directory of its own "
                  "(tenax-launch refuses a second launcher on one)");
  }
  try {
    const auto t0 = Clock::now();
    const std::string key = reuse != nullptr ? structure_key(header, shards, blobs) : std::string();
    const StructureWritten structure = write_file_structure(
        reuse, key, path, stamps, data, kDirectThreshold,
        [&](const FileStamps& with) { return write_structure(path, header, shards, blobs, with); }, "rank file");
    const std::vector<DatasetRange>& ranges = structure.datasets;
    const auto t1 = Clock::now();
    RawDataWriter raw(path, direct_io);
    for (std::size_t i = 0; i < data.size(); ++i)
      if (ranges[i].bytes > 0 && !(structure.reused && ranges[i].bytes < kDirectThreshold))
        raw.write(ranges[i].offset, static_cast<const std::uint8_t*>(data[i]), ranges[i].bytes);
    const auto t2 = Clock::now();
    raw.sync_and_close();
    const std::uint64_t size = fs::file_size(path);
    auto ms = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double, std::milli>(b - a).count();
    };
    TENAX_LOG(Debug, "ckpt") << path << ": " << size << " bytes (" << raw.direct_bytes() << " direct), structure ("
                             << structure.how << ") " << ms(t0, t1) << " ms, data " << ms(t1, t2) << " ms, fsync "
                             << ms(t2, Clock::now()) << " ms";
    return {size, raw.direct_bytes(), structure.reused};
  } catch (...) {
    // Truncate first: if HDF5 failed to close the file it keeps a descriptor open, which would hold the space of an
    // unlinked file until the process exits.
    if (::truncate(path.c_str(), 0) != 0) {
      // Nothing to free (the file was never created, or is gone already).
    }
    ::unlink(path.c_str());
    throw;
  }
}

RankFileReader::RankFileReader(const std::string& path) : path_(path), file_(h5::file_open_read(path)) {}

RankFileReader::Block RankFileReader::open(const std::string& dataset) {
  std::string where = path_ + " dataset " + dataset;
  h5::Handle id(h5::check(H5Dopen2(file_, dataset.c_str(), H5P_DEFAULT), "H5Dopen2", where), H5Dclose);
  return Block(std::move(where), std::move(id));
}

void RankFileReader::read_block(const std::string& dataset, DType dtype, const Dims& block_shape, void* dst,
                                const Dims& dst_shape, const Dims& dst_start) {
  open(dataset).read(dtype, block_shape, dst, dst_shape, dst_start);
}

void RankFileReader::Block::read(DType dtype, const Dims& block_shape, void* dst, const Dims& dst_shape,
                                 const Dims& dst_start) const {
  h5::Handle fspace(h5::check(H5Dget_space(dataset_), "H5Dget_space", where_), H5Sclose);
  int ndims = H5Sget_simple_extent_ndims(fspace);
  std::vector<hsize_t> dims(ndims > 0 ? ndims : 0);
  if (ndims > 0) H5Sget_simple_extent_dims(fspace, dims.data(), nullptr);
  if (Dims(dims.begin(), dims.end()) != block_shape)
    throw IoError(where_ + ": shape " + dims_string(Dims(dims.begin(), dims.end())) + " differs from the manifest's " +
                  dims_string(block_shape));
  h5::Handle type = h5::type_of(dtype);
  hid_t mspace_id = H5S_ALL;
  h5::Handle mspace;
  if (dst_shape != block_shape) {
    mspace = h5::dataspace(dst_shape);
    std::vector<hsize_t> start(dst_start.begin(), dst_start.end()), count(block_shape.begin(), block_shape.end());
    h5::check(H5Sselect_hyperslab(mspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
              "H5Sselect_hyperslab", where_);
    mspace_id = mspace;
  }
  h5::check(H5Dread(dataset_, type, mspace_id, H5S_ALL, H5P_DEFAULT, dst), "H5Dread", where_);
}

BlockAttributes RankFileReader::Block::attributes() const {
  BlockAttributes a;
  a.tensor = h5::read_attr_string(dataset_, "tensor", where_);
  a.dtype = h5::read_attr_string(dataset_, "dtype", where_);
  a.global_shape = h5::read_attr_u64s(dataset_, "global_shape", where_);
  a.offset = h5::read_attr_u64s(dataset_, "offset", where_);
  a.crc32c = h5::read_attr_u32(dataset_, "crc32c", where_);
  h5::Handle space(h5::check(H5Dget_space(dataset_), "H5Dget_space", where_), H5Sclose);
  const int ndims = H5Sget_simple_extent_ndims(space);
  if (ndims < 0 || ndims > 64) throw IoError(where_ + ": " + std::to_string(ndims) + " dimensions");
  std::vector<hsize_t> dims(ndims);
  if (ndims > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  a.shape.assign(dims.begin(), dims.end());
  return a;
}

std::vector<std::uint8_t> RankFileReader::read_bytes(const std::string& dataset, std::uint64_t expected_size) {
  std::vector<std::uint8_t> out(expected_size);
  if (expected_size == 0) return out;
  read_block(dataset, DType::U8, {expected_size}, out.data(), {expected_size}, {0});
  return out;
}

}  // namespace tenax::ckpt
