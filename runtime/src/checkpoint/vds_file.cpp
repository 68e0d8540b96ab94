#include "checkpoint/vds_file.hpp"

#include <unistd.h>

#include "checkpoint/hdf5_util.hpp"
#include "core/file_system.hpp"

namespace tenax::ckpt {
namespace {

void write_all(const std::string& path, const Manifest& m) {
  h5::Handle file = h5::file_create(path);
  h5::write_attr_u64(file, "tenax_format_version", m.version, path);
  h5::write_attr_u64(file, "step", m.step, path);
  h5::write_attr_u64(file, "world_size", static_cast<std::uint64_t>(m.world_size), path);
  h5::write_attr_u64s(file, "layout_tp_pp_dp",
                      {static_cast<std::uint64_t>(m.layout.tp), static_cast<std::uint64_t>(m.layout.pp),
                       static_cast<std::uint64_t>(m.layout.dp)},
                      path);
  h5::Handle lcpl = h5::lcpl_with_parents();
  for (const ManifestTensor& t : m.tensors) {
    h5::Handle dcpl(h5::check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate", path), H5Pclose);
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

}  // namespace

void write_vds_file(const std::string& path, const Manifest& manifest) {
  try {
    write_all(path, manifest);
    fs::fsync_path(path);
  } catch (...) {
    if (::truncate(path.c_str(), 0) != 0) {
      // Nothing to free: see write_rank_file.
    }
    ::unlink(path.c_str());
    throw;
  }
}

}  // namespace tenax::ckpt
