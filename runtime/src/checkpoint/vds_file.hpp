// The checkpoint's top-level HDF5 file (checkpoint.h5): one virtual dataset per tensor, at /<tensor name>, mapping
// every block to its dataset in the rank files by relative file name, so h5dump, h5ls and h5py read whole tensors
// wherever the directory is moved. Called on the I/O thread only.
#pragma once

#include <string>

#include "checkpoint/file_template.hpp"
#include "checkpoint/manifest.hpp"

namespace tenax::ckpt {

// Creates, closes and fsyncs `path` (it must not exist). With `reuse` (kept by the caller across its commits) the
// structure is learned once it repeats (from the second file) and later files of the same structure (the same tensors
// and blocks) are written from it without HDF5 (file_template.hpp): the same bytes; returns whether it was. On failure
// the partial file is removed.
bool write_vds_file(const std::string& path, const Manifest& manifest, FileTemplate* reuse = nullptr);

}  // namespace tenax::ckpt
