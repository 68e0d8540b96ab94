// Tensor: a block of memory with a dtype, a shape and a device. Deliberately small: it owns (or views) memory and says
// what the bytes are; arithmetic lives in tenax::kernels and in the layers.
//
// Ownership: a Tensor made by empty()/zeros() owns its storage through a shared handle, so copies of the Tensor alias
// the same bytes (as in PyTorch); clone() makes an independent copy. view() wraps memory owned elsewhere (a slice of a
// flat parameter buffer, for example) and never frees it.
//
// Device memory exists only in a build with CUDA; asking for it elsewhere throws UsageError. Device memory is allocated
// on the current CUDA device (ExecutionContext::empty/zeros make the context's device current and order the zeroing on
// its stream); Tensor's own fill_zero() and clone() on device memory are synchronous with respect to the host and the
// legacy stream only, so inside a step use the ExecutionContext's zero() and copy() instead. Host memory is 64-byte
// aligned and zero-filled at allocation (which also touches every page once, so the first real use is not slowed by
// page faults).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tenax/dtype.hpp"

namespace tenax {

enum class Device : std::uint8_t { Host, Cuda };

using Shape = std::vector<std::int64_t>;

// Product of the extents (1 for a scalar shape {}). Throws UsageError on a negative extent, and on a product that
// overflows 64 bits (0 when any extent is 0).
std::int64_t shape_numel(const Shape& shape);
// shape_numel(shape) * dtype_size(dtype): throws UsageError when it exceeds INT64_MAX bytes.
std::size_t shape_nbytes(const Shape& shape, DType dtype);
// "[4, 128]"
std::string shape_to_string(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(Shape shape, DType dtype, Device device = Device::Host);
  static Tensor zeros(Shape shape, DType dtype, Device device = Device::Host);
  // Non-owning: the caller keeps `data` alive for as long as the view is used.
  static Tensor view(void* data, Shape shape, DType dtype, Device device = Device::Host);

  // An owning deep copy on the same device.
  Tensor clone() const;

  bool defined() const { return data_ != nullptr || numel_ == 0; }
  void* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  std::int64_t numel() const { return numel_; }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel_) * dtype_size(dtype_); }
  std::int64_t dim(std::size_t i) const { return shape_.at(i); }

  // Typed access to host fp32 data; throws std::logic_error if the tensor is not a host F32 tensor (a programming
  // error).
  float* f32() const;
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }

  void fill_zero();
  std::string describe() const;  // "f32[4, 128] on host"

 private:
  std::shared_ptr<void> storage_;  // null for views
  void* data_ = nullptr;
  Shape shape_;
  std::int64_t numel_ = 0;
  DType dtype_ = DType::F32;
  Device device_ = Device::Host;
};

}  // namespace tenax
