// The names a checkpoint may hold: tensor names become HDF5 paths under /tensors and blob names datasets under
// /blobs, so both the writer (validating a program's shards) and the reader (validating a manifest from disk) refuse
// anything that could escape its group or collide.
#pragma once

#include <optional>
#include <string>

namespace tenax::ckpt {

// Why `name` is not a valid tensor name, or nothing. Tensor names use letters, digits and _ . - : /, with '/'
// separating non-empty components other than '.' and '..', at most 1024 characters.
std::optional<std::string> tensor_name_problem(const std::string& name);
inline constexpr const char* kTensorNameRule =
    "names use letters, digits and _ . - : /, with / separating non-empty components";

// Why `name` is not a valid blob name, or nothing: non-empty, at most 1024 characters, no '/', spaces, control
// characters.
std::optional<std::string> blob_name_problem(const std::string& name);

}  // namespace tenax::ckpt
