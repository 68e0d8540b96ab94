// Describing a distributed model's state: every parameter, master weight and optimizer moment as named pieces of
// global tensors, so that checkpointing, metrics and comparisons can work without knowing the parallel layout.
//
// A StateEntry is one contiguous block of memory on this rank that holds the box [offset, offset+shape) of the global
// tensor `name` (row-major, so the box's elements are contiguous in memory in row-major order). A tensor that tensor
// parallelism splits appears once per TP rank with its slice; a ZeRO-sharded optimizer tensor may appear as up to three
// boxes per rank and parameter (partial first row, whole rows, partial last row) because ZeRO shards the flat buffer.
// Replicated copies (data-parallel replicas, or parameters every TP rank holds whole) are listed by every holder;
// `primary` is true on exactly one holder of each element, the one a writer should use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tenax/communicator.hpp"
#include "tenax/dtype.hpp"
#include "tenax/execution.hpp"
#include "tenax/tensor.hpp"

namespace tenax {

// How a parameter is initialised. Initialisation is a function of (seed, name, global index) only, so every layout
// starts from the same global weights.
enum class ParameterInit { Zeros, Ones, Normal };

// One parameter as this rank holds it.
struct ParameterSpec {
  std::string name;         // unique, e.g. "blocks.2.fc1.weight"
  Shape global_shape;       // the whole tensor, as a single-rank run holds it
  Shape offset;             // where this rank's shard starts in the global tensor
  Shape shape;              // this rank's shard
  bool tp_sharded = false;  // false: every tensor-parallel rank holds the same whole tensor
  ParameterInit init = ParameterInit::Zeros;
  float init_std = 0.0f;  // Normal only
  // Declared by a module that uses another module's parameter (a tied weight, tenax/nn.hpp): the one declaration of a
  // name that may repeat another. Without it, two declarations of a name are a mistake the engine refuses.
  bool borrowed = false;
  // Set by the engine for a tied parameter whose canonical copy lives on an earlier pipeline stage (tenax/nn.hpp):
  // this copy is kept equal to it, and checkpoints, checksums and the gradient norm count the canonical one only.
  bool stage_replica = false;

  // Every field but borrowed and stage_replica: a borrowing declaration must describe the same tensor.
  bool same_parameter_as(const ParameterSpec& other) const {
    return name == other.name && global_shape == other.global_shape && offset == other.offset && shape == other.shape &&
           tp_sharded == other.tp_sharded && init == other.init && init_std == other.init_std;
  }

  // Throws UsageError unless offset+shape lies inside global_shape (naming the parameter).
  void validate() const;
};

struct StateEntry {
  std::string name;  // e.g. "param/blocks.0.fc1.weight", "adamw.m/blocks.0.fc1.weight"
  Shape global_shape;
  Shape offset;
  Shape shape;
  void* data = nullptr;
  DType dtype = DType::F32;
  bool primary = true;
  Device device = Device::Host;  // where `data` lives; readers of host memory take a HostStateMirror of device entries
};

// The boxes of the tensor `local_shape` (row-major) covered by its flat element range [begin, begin+count), each as
// (offset, shape) within the local tensor. At most 2*rank-1 boxes; an empty range gives none.
struct LocalBox {
  Shape offset;
  Shape shape;
  std::int64_t flat_begin;  // flat index (in the local tensor) of the box's first element
};
std::vector<LocalBox> boxes_of_flat_range(const Shape& local_shape, std::int64_t begin, std::int64_t count);

// A checksum of the global tensors described by `entries` (only primary entries count) that is independent of how they
// are sharded: each element contributes a hash of (tensor name, global flat index, value bits), combined by addition
// modulo 2^64 over all ranks of `world`. Two runs whose global tensors are bitwise equal get the same value, whatever
// their layouts. A collective over `world` (a host communicator). Every entry must be in host memory (UsageError
// otherwise: checksum a HostStateMirror's entries).
std::uint64_t global_checksum(const std::vector<StateEntry>& entries, Communicator& world);

// Host copies of state entries that live in device memory, for everything that reads state as host memory
// (checkpoints, checksums). host_entries() are the entries with `data` redirected to host buffers owned by the mirror
// (host entries pass through unchanged: their data is already host memory). pull() copies device -> host (waiting for
// the context's queued work first), push() host -> device (after a checkpoint load wrote the host buffers). The
// buffers are allocated once, at construction.
class HostStateMirror {
 public:
  HostStateMirror(std::vector<StateEntry> entries, ExecutionContext& context);

  const std::vector<StateEntry>& host_entries() const { return host_; }
  void pull();
  void push();

 private:
  ExecutionContext& ctx_;
  std::vector<StateEntry> device_;  // the original entries
  std::vector<StateEntry> host_;
  std::vector<std::vector<unsigned char>> storage_;  // one host buffer per device entry
};

}  // namespace tenax
