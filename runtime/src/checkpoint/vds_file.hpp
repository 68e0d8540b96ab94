// The checkpoint's top-level HDF5 file (checkpoint.h5): one virtual dataset per tensor, at /<tensor name>, mapping
// every block to its dataset in the rank files by relative file name, so h5dump, h5ls and h5py read whole tensors
// wherever the directory is moved. Called on the I/O thread only.
#pragma once

#include <string>

#include "checkpoint/manifest.hpp"

namespace tenax::ckpt {

// Creates, closes and fsyncs `path`.
void write_vds_file(const std::string& path, const Manifest& manifest);

}  // namespace tenax::ckpt
