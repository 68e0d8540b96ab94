#include "checkpoint/vds_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include "checkpoint/hdf5_util.hpp"
#include "core/file_system.hpp"

namespace tenax::ckpt {
namespace {

void write_all(const std::string& path, const Manifest& m, std::uint64_t step) {
  h5::Handle file = h5::file_create(path);
  h5::write_attr_u64(file, "tenax_format_version", m.version, path);
  h5::write_attr_u64(file, "step", step, path);
  h5::write_attr_u64(file, "world_size", static_cast<std::uint64_t>(m.world_size), path);
  h5::write_attr_u64s(file, "layout_tp_pp_dp",
                      {static_cast<std::uint64_t>(m.layout.tp), static_cast<std::uint64_t>(m.layout.pp),
                       static_cast<std::uint64_t>(m.layout.dp)},
                      path);
  h5::Handle lcpl = h5::lcpl_with_parents();
  for (const ManifestTensor& t : m.tensors) {
    h5::Handle dcpl(h5::check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate", path), H5Pclose);
    // No modification times: a file is a function of its contents (the template relies on it).
    h5::check(H5Pset_obj_track_times(dcpl, false), "H5Pset_obj_track_times", path);
    h5::Handle vspace = h5::dataspace(t.global_shape);
    for (const ManifestBlock& b : t.blocks) {
      std::vector<hsize_t> start(b.box.offset.begin(), b.box.offset.end());
      std::vector<hsize_t> count(b.box.shape.begin(), b.box.shape.end());
      h5::check(H5Sselect_hyperslab(vspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
                "H5Sselect_hyperslab", path);
      h5::Handle sspace = h5::dataspace(b.box.shape);
      h5::check(H5Pset_virtual(dcpl, vspace, rank_file_name(b.rank).c_str(), b.dataset.c_str(), sspace),
                "H5Pset_virtual", path);
    }
    h5::check(H5Sselect_all(vspace), "H5Sselect_all", path);
    h5::Handle type = h5::type_of(t.dtype);
    h5::Handle dset(
        h5::check(H5Dcreate2(file, ("/" + t.name).c_str(), type, vspace, lcpl, dcpl, H5P_DEFAULT), "H5Dcreate2", path),
        H5Dclose);
  }
  h5::check(file.close(), "H5Fclose", path);
}

// Everything but the step: the file's structure.
std::string structure_key(const Manifest& m) {
  std::string key = std::to_string(m.version) + " " + std::to_string(m.world_size) + " " + std::to_string(m.layout.tp) +
                    " " + std::to_string(m.layout.pp) + " " + std::to_string(m.layout.dp) + "\n";
  for (const ManifestTensor& t : m.tensors) {
    key += t.name + " " + std::string(dtype_name(t.dtype)) + " " + dims_string(t.global_shape) + "\n";
    for (const ManifestBlock& b : t.blocks)
      key += " " + std::to_string(b.rank) + " " + b.dataset + " " + dims_string(b.box.offset) + " " +
             dims_string(b.box.shape) + "\n";
  }
  return key;
}

}  // namespace

bool write_vds_file(const std::string& path, const Manifest& manifest, FileTemplate* reuse) {
  // The name is claimed first (an existing file is refused, and left as it is): the clean-up below removes only what
  // this call created.
  if (::close(fs::open_file(path, O_WRONLY | O_CREAT | O_EXCL, 0666)) != 0) fs::throw_errno("close", path, errno);
  try {
    const std::string key = reuse != nullptr ? structure_key(manifest) : std::string();
    const bool reused = write_file_structure(
                            reuse, key, path, FileStamps{manifest.step, {}}, {}, 0,
                            [&](const FileStamps& with) {
                              write_all(path, manifest, with.step);
                              return std::vector<DatasetRange>{};
                            },
                            "VDS file")
                            .reused;
    fs::fsync_path(path);
    return reused;
  } catch (...) {
    if (::truncate(path.c_str(), 0) != 0) {
      // Nothing to free: see write_rank_file.
    }
    ::unlink(path.c_str());
    throw;
  }
}

}  // namespace tenax::ckpt
