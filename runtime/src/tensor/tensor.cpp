#include "tenax/tensor.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "core/host_memory.hpp"
#include "tenax/build_config.hpp"
#include "tenax/error.hpp"

#if TENAX_HAVE_CUDA
#include "core/check_cuda.hpp"
#endif

namespace tenax {

namespace {

constexpr std::size_t kHostAlignment = 64;  // a cache line, and what AVX-512 loads like

std::shared_ptr<void> allocate(std::size_t bytes, Device device) {
  if (device == Device::Host) {
    // aligned_alloc needs a size that is a multiple of the alignment.
    const std::size_t rounded =
        std::max((bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment, kHostAlignment);
    // Charged first: while the engine builds a model, a tensor over the rank's share of the node's memory is refused
    // with an error naming it, before its pages are touched (core/host_memory.hpp).
    detail::charge_host_memory(rounded);
    void* p = std::aligned_alloc(kHostAlignment, rounded);
    if (p == nullptr) {
      detail::release_host_memory(rounded);
      throw Error("tensor: cannot allocate " + detail::format_bytes(bytes) + " of host memory (" +
                  detail::format_bytes(detail::charged_host_memory()) +
                  " of tensors and staging buffers already held)");
    }
    return std::shared_ptr<void>(p, [rounded](void* q) {
      std::free(q);
      detail::release_host_memory(rounded);
    });
  }
#if TENAX_HAVE_CUDA
  void* p = nullptr;
  const cudaError_t rc = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (rc == cudaErrorMemoryAllocation) {
    // Not retried by tenax-launch (a usage error): the same model runs out of the same memory at every restart.
    (void)cudaGetLastError();  // this error is not sticky: clear it
    std::size_t free = 0, total = 0;
    int index = -1;
    (void)cudaMemGetInfo(&free, &total);
    (void)cudaGetDevice(&index);
    throw UsageError("tensor: cannot allocate " + detail::format_bytes(bytes) +
                     " of device memory on cuda:" + std::to_string(index) + " (" + detail::format_bytes(free) +
                     " free of " + detail::format_bytes(total) +
                     "): the model, its activations or its optimizer state do not fit this GPU. " +
                     detail::kModelTooLargeFix);
  }
  TENAX_CHECK_CUDA(rc);
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
#else
  throw UsageError(
      "tensor: device memory requested but this build of tenax has no CUDA; use Device::Host or "
      "rebuild with -DTENAX_WITH_CUDA=ON");
#endif
}

void zero_bytes(void* data, std::size_t bytes, Device device) {
  if (bytes == 0) return;
  if (device == Device::Host) {
    std::memset(data, 0, bytes);
    return;
  }
#if TENAX_HAVE_CUDA
  // cudaMemset runs on the legacy default stream, which does not order against non-blocking streams (those of
  // ExecutionContext and NCCL): wait for it, so the zeros are in place whatever stream reads them next.
  TENAX_CHECK_CUDA(cudaMemset(data, 0, bytes));
  TENAX_CHECK_CUDA(cudaDeviceSynchronize());
#endif
}

}  // namespace

std::int64_t shape_numel(const Shape& shape) {
  bool empty = false;
  for (std::int64_t d : shape) {
    if (d < 0) throw UsageError("tensor: negative extent in shape " + shape_to_string(shape));
    empty = empty || d == 0;
  }
  // A zero extent anywhere makes the product 0, even after extents whose partial product alone would overflow.
  if (empty) return 0;
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n))
      throw UsageError("tensor: shape " + shape_to_string(shape) +
                       " has more elements than a 64-bit count can hold (overflow); check the extents");
  }
  return n;
}

std::size_t shape_nbytes(const Shape& shape, DType dtype) {
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(shape_numel(shape), static_cast<std::int64_t>(dtype_size(dtype)), &bytes))
    throw UsageError("tensor: " + std::string(dtype_name(dtype)) + shape_to_string(shape) +
                     " needs more bytes than a 64-bit size can hold (overflow); check the extents");
  return static_cast<std::size_t>(bytes);
}

std::string shape_to_string(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < shape.size(); ++i)
    out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  shape_nbytes(shape, dtype);  // nbytes() must not wrap around
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = allocate(t.nbytes(), device);
  t.data_ = t.storage_.get();
  // Host memory is zeroed even by empty(): it pre-touches the pages and keeps uninitialised bytes out of checksums.
  if (device == Device::Host) zero_bytes(t.data_, t.nbytes(), device);
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device device) {
  Tensor t = empty(std::move(shape), dtype, device);
  t.fill_zero();
  return t;
}

Tensor Tensor::view(void* data, Shape shape, DType dtype, Device device) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  shape_nbytes(shape, dtype);  // nbytes() must not wrap around
  if (data == nullptr && t.numel_ > 0) throw std::logic_error("Tensor::view of a null pointer");
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.data_ = data;
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device_);
  if (nbytes() == 0) return t;
  if (device_ == Device::Host) {
    std::memcpy(t.data_, data_, nbytes());
  } else {
#if TENAX_HAVE_CUDA
    // cudaMemcpy waits for the copy but not for work still queued on other streams that writes the source: callers
    // synchronise their stream first (documented in tensor.hpp).
    TENAX_CHECK_CUDA(cudaMemcpy(t.data_, data_, nbytes(), cudaMemcpyDeviceToDevice));
#endif
  }
  return t;
}

float* Tensor::f32() const {
  if (dtype_ != DType::F32 || device_ != Device::Host)
    throw std::logic_error("Tensor::f32() on " + describe() + ": only host f32 tensors give float pointers");
  return static_cast<float*>(data_);
}

void Tensor::fill_zero() {
  zero_bytes(data_, nbytes(), device_);
}

std::string Tensor::describe() const {
  return std::string(dtype_name(dtype_)) + shape_to_string(shape_) +
         (device_ == Device::Host ? " on host" : " on cuda");
}

}  // namespace tenax
