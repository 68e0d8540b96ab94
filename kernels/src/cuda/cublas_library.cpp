#include "cuda/cublas_library.hpp"

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "tenax/error.hpp"

#ifndef TENAX_CUBLAS_BUILD_PATH
#define TENAX_CUBLAS_BUILD_PATH ""
#endif

namespace tenax::kernels::detail {
namespace {

struct Opened {
  CublasLibrary library;
  std::string error;  // non-empty: cuBLAS is unusable, and this says why
};

Opened open_cublas() {
  Opened out;
  // The soname first, so that LD_LIBRARY_PATH and the system's cache choose as they would for a linked library; then
  // the file the build found (a toolkit outside the loader's paths, as /usr/local/cuda usually is).
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  std::string opened_path;
  void* handle = nullptr;
  std::string reasons;
  for (const std::string& candidate : {soname, std::string(TENAX_CUBLAS_BUILD_PATH)}) {
    if (candidate.empty()) continue;
    handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      opened_path = candidate;
      break;
    }
    const char* why = ::dlerror();
    reasons += "\n  " + candidate + ": " + (why ? why : "not found");
  }
  if (handle == nullptr) {
    out.error = "cuBLAS " + std::to_string(CUBLAS_VER_MAJOR) +
                " cannot be opened, so no gemm can run on the GPU:" + reasons +
                "\ninstall the CUDA toolkit's cuBLAS or put its directory on LD_LIBRARY_PATH";
    return out;
  }
  CublasLibrary& l = out.library;
  l.path = opened_path;
  auto resolve = [&](auto& field, const char* name) {
    field = reinterpret_cast<std::remove_reference_t<decltype(field)>>(::dlsym(handle, name));
    if (field == nullptr) out.error += std::string(out.error.empty() ? "" : ", ") + name;
  };
  resolve(l.create, "cublasCreate_v2");
  resolve(l.destroy, "cublasDestroy_v2");
  resolve(l.set_stream, "cublasSetStream_v2");
  resolve(l.set_math_mode, "cublasSetMathMode");
  resolve(l.sgemm, "cublasSgemm_v2");
  resolve(l.gemm_ex, "cublasGemmEx");
  resolve(l.sgemm_strided_batched, "cublasSgemmStridedBatched");
  resolve(l.gemm_strided_batched_ex, "cublasGemmStridedBatchedEx");
  resolve(l.status_name, "cublasGetStatusName");
  resolve(l.status_string, "cublasGetStatusString");
  if (!out.error.empty())
    out.error = opened_path + " lacks " + out.error + ": it is not the cuBLAS " + std::to_string(CUBLAS_VER_MAJOR) +
                " tenax was built with; put that one first on LD_LIBRARY_PATH";
  // Never dlclose'd: handles and streams created through it may outlive any owner here.
  return out;
}

}  // namespace

const CublasLibrary& cublas() {
  // Never destroyed, like the library itself: a handle released during static destruction still finds it.
  static const Opened* const opened = new Opened(open_cublas());
  if (!opened->error.empty()) throw DeviceError(opened->error);
  return opened->library;
}

}  // namespace tenax::kernels::detail
