#include "checkpoint/shard_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "checkpoint/fs_util.hpp"
#include "checkpoint/manifest.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"

namespace tenax::ckpt {
namespace {

// Bytes per H5Dwrite of a large dataset. After each slice the kernel is asked to start writing it back, so the disk
// works while the next slice is copied into the page cache and the closing fsync finds little left to do. 16 MiB is
// large enough that the per-call cost vanishes and small enough that writeback starts early.
constexpr std::uint64_t kSliceBytes = std::uint64_t{16} << 20;

// Starts writeback of the file's dirty pages without waiting for it (Linux sync_file_range; durability still comes
// from the fsync after the file is closed). Best effort: a file system that cannot do it just waits for the fsync.
void start_writeback(hid_t file) {
  void* handle = nullptr;
  if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || handle == nullptr) {
    h5::take_error_stack();
    return;
  }
  ::sync_file_range(*static_cast<int*>(handle), 0, 0, SYNC_FILE_RANGE_WRITE);
}

void write_dataset(hid_t file, const std::string& name, hid_t type, const Dims& dims, const void* data,
                   const std::string& path) {
  h5::Handle space = h5::dataspace(dims);
  h5::Handle lcpl = h5::lcpl_with_parents();
  h5::Handle dcpl(h5::check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate", path), H5Pclose);
  // Contiguous, no fill values: the block is written exactly once, straight from the staging buffer.
  h5::check(H5Pset_layout(dcpl, H5D_CONTIGUOUS), "H5Pset_layout", path);
  h5::check(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), "H5Pset_fill_time", path);
  h5::Handle dset(h5::check(H5Dcreate2(file, name.c_str(), type, space, lcpl, dcpl, H5P_DEFAULT), "H5Dcreate2", path),
                  H5Dclose);
  const std::uint64_t elements = volume(dims);
  if (elements == 0) return;
  const std::uint64_t row_elements = elements / dims[0];
  const std::uint64_t row_bytes = row_elements * H5Tget_size(type);
  const std::uint64_t rows_per_slice = std::max<std::uint64_t>(1, kSliceBytes / row_bytes);
  const std::string what = "H5Dwrite " + name;
  if (rows_per_slice >= dims[0]) {
    h5::check(H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), what.c_str(), path);
    start_writeback(file);
    return;
  }
  const auto* bytes = static_cast<const std::uint8_t*>(data);
  std::vector<hsize_t> start(dims.size(), 0), count(dims.begin(), dims.end());
  for (std::uint64_t row = 0; row < dims[0]; row += rows_per_slice) {
    count[0] = std::min(rows_per_slice, dims[0] - row);
    start[0] = row;
    h5::Handle fspace(h5::check(H5Scopy(space), "H5Scopy", path), H5Sclose);
    h5::check(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
              "H5Sselect_hyperslab", path);
    h5::Handle mspace = h5::dataspace(Dims(count.begin(), count.end()));
    h5::check(H5Dwrite(dset, type, mspace, fspace, H5P_DEFAULT, bytes + row * row_bytes), what.c_str(), path);
    start_writeback(file);
  }
}

void write_all(const std::string& path, const RankFileHeader& header, const std::vector<ShardWrite>& shards,
               const std::vector<BlobWrite>& blobs) {
  h5::Handle file = h5::file_create(path);
  h5::write_attr_u64(file, "tenax_format_version", kFormatVersion, path);
  h5::write_attr_u64(file, "step", header.step, path);
  h5::write_attr_u64(file, "rank", static_cast<std::uint64_t>(header.rank), path);
  h5::write_attr_u64(file, "world_size", static_cast<std::uint64_t>(header.world_size), path);
  h5::write_attr_u64s(file, "layout_tp_pp_dp",
                      {static_cast<std::uint64_t>(header.layout.tp), static_cast<std::uint64_t>(header.layout.pp),
                       static_cast<std::uint64_t>(header.layout.dp)},
                      path);
  for (const ShardWrite& s : shards) {
    const std::string& name = s.dataset;
    h5::Handle type = h5::type_of(s.dtype);
    write_dataset(file, name, type, s.box.shape, s.data, path);
    h5::Handle dset(h5::check(H5Dopen2(file, name.c_str(), H5P_DEFAULT), "H5Dopen2", path), H5Dclose);
    h5::write_attr_string(dset, "tensor", s.tensor, path);
    h5::write_attr_string(dset, "dtype", std::string(dtype_name(s.dtype)), path);
    h5::write_attr_u64s(dset, "global_shape", s.global_shape, path);
    h5::write_attr_u64s(dset, "offset", s.box.offset, path);
    h5::write_attr_u32(dset, "crc32c", s.crc32c, path);
  }
  h5::Handle u8 = h5::type_of(DType::U8);
  for (const BlobWrite& b : blobs) {
    const std::string name = blob_dataset(b.name);
    write_dataset(file, name, u8, {b.bytes->size()}, b.bytes->data(), path);
    h5::Handle dset(h5::check(H5Dopen2(file, name.c_str(), H5P_DEFAULT), "H5Dopen2", path), H5Dclose);
    h5::write_attr_u32(dset, "crc32c", b.crc32c, path);
  }
  // Closing writes the metadata; a failure here (ENOSPC) must not go unnoticed.
  h5::check(file.close(), "H5Fclose", path);
}

}  // namespace

std::uint64_t write_rank_file(const std::string& path, const RankFileHeader& header,
                              const std::vector<ShardWrite>& shards, const std::vector<BlobWrite>& blobs) {
  using Clock = std::chrono::steady_clock;
  try {
    const auto t0 = Clock::now();
    write_all(path, header, shards, blobs);
    const auto t1 = Clock::now();
    fs::fsync_path(path);
    const std::uint64_t size = fs::file_size(path);
    auto ms = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double, std::milli>(b - a).count();
    };
    TENAX_LOG(Debug, "ckpt") << path << ": " << size << " bytes, HDF5 write " << ms(t0, t1) << " ms, fsync "
                             << ms(t1, Clock::now()) << " ms";
    return size;
  } catch (...) {
    ::unlink(path.c_str());
    throw;
  }
}

RankFileReader::RankFileReader(const std::string& path) : path_(path), file_(h5::file_open_read(path)) {}

void RankFileReader::read_block(const std::string& dataset, DType dtype, const Dims& block_shape, void* dst,
                                const Dims& dst_shape, const Dims& dst_start) {
  const std::string where = path_ + " dataset " + dataset;
  hid_t id = H5Dopen2(file_, dataset.c_str(), H5P_DEFAULT);
  h5::check(id, "H5Dopen2", where);
  h5::Handle dset(id, H5Dclose);
  h5::Handle fspace(h5::check(H5Dget_space(dset), "H5Dget_space", where), H5Sclose);
  int ndims = H5Sget_simple_extent_ndims(fspace);
  std::vector<hsize_t> dims(ndims > 0 ? ndims : 0);
  if (ndims > 0) H5Sget_simple_extent_dims(fspace, dims.data(), nullptr);
  if (Dims(dims.begin(), dims.end()) != block_shape)
    throw IoError(where + ": shape " + dims_string(Dims(dims.begin(), dims.end())) + " differs from the manifest's " +
                  dims_string(block_shape));
  h5::Handle type = h5::type_of(dtype);
  hid_t mspace_id = H5S_ALL;
  h5::Handle mspace;
  if (dst_shape != block_shape) {
    mspace = h5::dataspace(dst_shape);
    std::vector<hsize_t> start(dst_start.begin(), dst_start.end()), count(block_shape.begin(), block_shape.end());
    h5::check(H5Sselect_hyperslab(mspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
              "H5Sselect_hyperslab", where);
    mspace_id = mspace;
  }
  h5::check(H5Dread(dset, type, mspace_id, H5S_ALL, H5P_DEFAULT, dst), "H5Dread", where);
}

std::vector<std::uint8_t> RankFileReader::read_bytes(const std::string& dataset, std::uint64_t expected_size) {
  std::vector<std::uint8_t> out(expected_size);
  if (expected_size == 0) return out;
  read_block(dataset, DType::U8, {expected_size}, out.data(), {expected_size}, {0});
  return out;
}

}  // namespace tenax::ckpt
