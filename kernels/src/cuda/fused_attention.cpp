// cuDNN's fused flash attention through its frontend's graph API (fused_attention.hpp). Host code only.
//
// Why the frontend and not cuDNN's C backend API directly: the fused attention engines are reached only through an
// operation graph (two matrix products, the scale, the causal mask, a reduction-based softmax; the backward graph is
// several times larger) that the engine heuristics must recognise exactly. NVIDIA's frontend (header-only, Apache-2.0,
// the one PyTorch and Transformer Engine build on) writes those graphs; tenax names the tensors and the options.
//
// The frontend is told to load cuDNN itself at run time (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING) from the handle opened
// here, so libtenax links no cuDNN and a CPU run never loads it.
#include "tenax/kernels/fused_attention.hpp"

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>

#include "common/attention_validate.hpp"
#include "cuda/check.hpp"
#include "tenax/error.hpp"

#if TENAX_HAVE_CUDNN_FRONTEND
#include <dlfcn.h>

#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#include <cudnn_frontend.h>

// The frontend's dynamic loading resolves every cuDNN call through this handle (declared extern by the frontend; set
// once by open_cudnn below, never closed).
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

#ifndef TENAX_CUDNN_BUILD_PATH
#define TENAX_CUDNN_BUILD_PATH ""
#endif
#endif

namespace tenax::kernels::cuda {
namespace {

// What rules a problem out before any device call: sizes (UsageError when they overflow), the dtype, the head size.
std::string shape_reason(const FusedAttentionShape& s) {
  (void)detail::attention_dims("fused_attention", s.B, s.H, s.T, s.D);
  detail::require_finite_scale("fused_attention", s.scale);
  if (s.dtype != DType::BF16 && s.dtype != DType::F16)
    return "cuDNN's fused attention takes bf16 or fp16 inputs, not " + std::string(dtype_name(s.dtype));
  if (s.D % 8 != 0 || s.D > 256)
    return "head size " + std::to_string(s.D) +
           ": cuDNN's fused attention needs a multiple of 8 (16-byte rows) of at most 256";
  return "";
}

}  // namespace

#if TENAX_HAVE_CUDNN_FRONTEND
namespace {

namespace fe = cudnn_frontend;

// Tensor ids of the graphs' variant packs.
enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

// "" once cuDNN is open; else why it cannot be (the same answer on every later call).
const std::string& open_cudnn() {
  static const std::string* const why = [] {
    const std::string soname = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
    std::string reasons;
    for (const std::string& candidate : {soname, std::string(TENAX_CUDNN_BUILD_PATH)}) {
      if (candidate.empty()) continue;
      void* handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) {
        using GetVersion = std::size_t (*)();
        auto version = reinterpret_cast<GetVersion>(::dlsym(handle, "cudnnGetVersion"));
        if (version == nullptr) {
          reasons += "\n  " + candidate + ": no cudnnGetVersion, so not cuDNN";
          continue;
        }
        if (version() / 10000 != CUDNN_MAJOR) {
          reasons += "\n  " + candidate + ": cuDNN " + std::to_string(version()) + ", but tenax was built for " +
                     std::to_string(CUDNN_MAJOR) + ".x";
          continue;
        }
        fe::cudnn_dlhandle = handle;
        return new std::string();
      }
      const char* err = ::dlerror();
      reasons += "\n  " + candidate + ": " + (err ? err : "not found");
    }
    return new std::string("cuDNN " + std::to_string(CUDNN_MAJOR) + " cannot be opened:" + reasons +
                           "\n(install cuDNN 9 or put its lib directory on LD_LIBRARY_PATH)");
  }();
  return *why;
}

// One cuDNN handle per thread and device (a handle must not be used by two threads at once), created on first use and
// kept for the thread's life.
cudnnHandle_t handle_for(int device) {
  thread_local std::map<int, cudnnHandle_t> handles;
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cudnnHandle_t h = nullptr;
  const cudnnStatus_t status = fe::detail::create_handle(&h);
  if (status != CUDNN_STATUS_SUCCESS)
    throw DeviceError("cudnnCreate failed on device " + std::to_string(device) + ": " +
                      fe::detail::get_error_string(status));
  handles.emplace(device, h);
  return h;
}

struct Problem {
  int device;
  std::size_t B, H, T, D;
  DType dtype;
  std::uint32_t scale_bits;
  auto key() const { return std::tie(device, B, H, T, D, dtype, scale_bits); }
  bool operator<(const Problem& o) const { return key() < o.key(); }
};

struct Graphs {
  std::string unsupported;  // "" when both graphs built
  std::shared_ptr<fe::graph::Graph> forward, backward;
  std::size_t forward_bytes = 0, backward_bytes = 0;
  bool deterministic = false;
  std::string description;
};

std::vector<std::int64_t> packed_strides(const FusedAttentionShape& s) {
  const auto T = static_cast<std::int64_t>(s.T), H = static_cast<std::int64_t>(s.H), D = static_cast<std::int64_t>(s.D);
  return {T * 3 * H * D, 3 * D, 3 * H * D, 1};  // [B, H, T, D] views of the packed QKV rows
}
std::vector<std::int64_t> merged_strides(const FusedAttentionShape& s) {
  const auto T = static_cast<std::int64_t>(s.T), H = static_cast<std::int64_t>(s.H), D = static_cast<std::int64_t>(s.D);
  return {T * H * D, D, H * D, 1};  // [B, H, T, D] views of the merged output rows
}
std::vector<std::int64_t> head_dims(const FusedAttentionShape& s) {
  return {static_cast<std::int64_t>(s.B), static_cast<std::int64_t>(s.H), static_cast<std::int64_t>(s.T),
          static_cast<std::int64_t>(s.D)};
}

std::shared_ptr<fe::graph::Graph> new_graph(const FusedAttentionShape& s) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(s.dtype == DType::F16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph& g, const char* name, Uid uid,
                                                    std::vector<std::int64_t> dims, std::vector<std::int64_t> strides) {
  return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims).set_stride(strides));
}

std::vector<std::int64_t> stats_dims(const FusedAttentionShape& s) {
  return {static_cast<std::int64_t>(s.B), static_cast<std::int64_t>(s.H), static_cast<std::int64_t>(s.T), 1};
}
std::vector<std::int64_t> stats_strides(const FusedAttentionShape& s) {
  const auto H = static_cast<std::int64_t>(s.H), T = static_cast<std::int64_t>(s.T);
  return {H * T, T, 1, 1};
}

std::shared_ptr<fe::graph::Graph> forward_graph(const FusedAttentionShape& s) {
  auto g = new_graph(s);
  auto q = input(*g, "q", kQ, head_dims(s), packed_strides(s));
  auto k = input(*g, "k", kK, head_dims(s), packed_strides(s));
  auto v = input(*g, "v", kV, head_dims(s), packed_strides(s));
  auto options = fe::graph::SDPA_attributes()
                     .set_name("tenax_attention_forward")
                     .set_generate_stats(true)
                     .set_causal_mask(true)
                     .set_attn_scale(s.scale);
  auto [o, stats] = g->sdpa(q, k, v, options);
  o->set_output(true).set_uid(kO).set_dim(head_dims(s)).set_stride(merged_strides(s));
  stats->set_output(true)
      .set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim(stats_dims(s))
      .set_stride(stats_strides(s));
  return g;
}

std::shared_ptr<fe::graph::Graph> backward_graph(const FusedAttentionShape& s, bool deterministic) {
  auto g = new_graph(s);
  auto q = input(*g, "q", kQ, head_dims(s), packed_strides(s));
  auto k = input(*g, "k", kK, head_dims(s), packed_strides(s));
  auto v = input(*g, "v", kV, head_dims(s), packed_strides(s));
  auto o = input(*g, "o", kO, head_dims(s), merged_strides(s));
  auto d_o = input(*g, "dO", kDO, head_dims(s), merged_strides(s));
  auto stats = g->tensor(fe::graph::Tensor_attributes()
                             .set_name("stats")
                             .set_uid(kStats)
                             .set_data_type(fe::DataType_t::FLOAT)
                             .set_dim(stats_dims(s))
                             .set_stride(stats_strides(s)));
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("tenax_attention_backward")
                     .set_causal_mask(true)
                     .set_attn_scale(s.scale)
                     .set_deterministic_algorithm(deterministic);
  auto grads = g->sdpa_backward(q, k, v, o, d_o, stats, options);
  const Uid uids[3] = {kDQ, kDK, kDV};
  for (int i = 0; i < 3; ++i)
    grads[i]->set_output(true).set_uid(uids[i]).set_dim(head_dims(s)).set_stride(packed_strides(s));
  return g;
}

// "" once the graph is built into an executable plan; else the frontend's reason.
std::string build(fe::graph::Graph& g, cudnnHandle_t handle) {
  try {
    if (auto e = g.validate(); !e.is_good()) return "validate: " + e.get_message();
    if (auto e = g.build_operation_graph(handle); !e.is_good()) return "build_operation_graph: " + e.get_message();
    if (auto e = g.create_execution_plans({fe::HeurMode_t::A}); !e.is_good())
      return "create_execution_plans: " + e.get_message();
    if (auto e = g.check_support(handle); !e.is_good()) return "check_support: " + e.get_message();
    if (auto e = g.build_plans(handle); !e.is_good()) return "build_plans: " + e.get_message();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::size_t workspace_of(const fe::graph::Graph& g) {
  const std::int64_t bytes = g.get_workspace_size();
  return bytes <= 0 ? 0 : (static_cast<std::size_t>(bytes) + 255) / 256 * 256;
}

Graphs make_graphs(const FusedAttentionShape& s, int device) {
  Graphs out;
  if (const std::string& why = open_cudnn(); !why.empty()) {
    out.unsupported = why;
    return out;
  }
  // A handle cuDNN cannot create (no memory left on the device, a driver cuDNN does not support) makes the problem
  // unsupported with the reason, so that TENAX_ATTENTION=auto falls back to the batched core instead of failing.
  cudnnHandle_t handle = nullptr;
  try {
    handle = handle_for(device);
  } catch (const DeviceError& e) {
    (void)cudaGetLastError();  // leave no error pending for an unrelated later check
    out.unsupported = e.what();
    return out;
  }
  out.forward = forward_graph(s);
  if (std::string why = build(*out.forward, handle); !why.empty()) {
    out.unsupported = "no cuDNN engine for the forward: " + why;
    return out;
  }
  // Deterministic first (restarts and layout changes then reproduce a run's result bit for bit); where this cuDNN or
  // GPU has no deterministic backward engine, the fastest one.
  out.backward = backward_graph(s, true);
  out.deterministic = build(*out.backward, handle).empty();
  if (!out.deterministic) {
    out.backward = backward_graph(s, false);
    if (std::string why = build(*out.backward, handle); !why.empty()) {
      out.unsupported = "no cuDNN engine for the backward: " + why;
      return out;
    }
  }
  out.forward_bytes = workspace_of(*out.forward);
  out.backward_bytes = workspace_of(*out.backward);
  out.description = "cuDNN " + std::to_string(fe::detail::get_backend_version()) + " fused attention (" +
                    std::string(dtype_name(s.dtype)) + ", B " + std::to_string(s.B) + ", H " + std::to_string(s.H) +
                    ", T " + std::to_string(s.T) + ", D " + std::to_string(s.D) + "), " +
                    (out.deterministic ? "deterministic backward" : "non-deterministic backward");
  return out;
}

// The graphs of this thread for a problem on the current device, built on first use.
const Graphs& graphs(const FusedAttentionShape& s) {
  int device = 0;
  TENAX_CUDA_CHECK(cudaGetDevice(&device));
  std::uint32_t bits = 0;
  std::memcpy(&bits, &s.scale, sizeof bits);
  thread_local std::map<Problem, Graphs> cache;
  const Problem key{device, s.B, s.H, s.T, s.D, s.dtype, bits};
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, make_graphs(s, device)).first;
  return it->second;
}

const Graphs& usable(const char* op, const FusedAttentionShape& s) {
  if (std::string why = shape_reason(s); !why.empty())
    throw DeviceError(std::string("tenax::kernels::") + op + ": cuDNN's fused attention cannot run this problem: " +
                      why + "; use the batched core (attention_forward/attention_backward)");
  const Graphs& g = graphs(s);
  if (!g.unsupported.empty())
    throw DeviceError(std::string("tenax::kernels::") + op + ": cuDNN's fused attention cannot run this problem: " +
                      g.unsupported + "; use the batched core (attention_forward/attention_backward)");
  return g;
}

void execute(const char* op, const fe::graph::Graph& g, std::unordered_map<std::int64_t, void*>& pack,
             std::size_t needed, void* workspace, std::size_t workspace_bytes, void* stream) {
  if (workspace_bytes < needed)
    detail::usage_error(op, "workspace_bytes = " + std::to_string(workspace_bytes) + " but cuDNN needs " +
                                std::to_string(needed) + " (fused_attention_*_workspace_bytes)");
  int device = 0;
  TENAX_CUDA_CHECK(cudaGetDevice(&device));
  cudnnHandle_t handle = handle_for(device);
  if (const cudnnStatus_t s = fe::detail::set_stream(handle, static_cast<cudaStream_t>(stream));
      s != CUDNN_STATUS_SUCCESS)
    throw DeviceError(std::string(op) + ": cudnnSetStream failed: " + fe::detail::get_error_string(s));
  auto status = g.execute(handle, pack, workspace);
  if (!status.is_good())
    throw DeviceError(std::string(op) + ": cuDNN's fused attention failed: " + status.get_message());
}

void* offset(const void* base, std::size_t elems) {
  return static_cast<char*>(const_cast<void*>(base)) + elems * 2;  // 16-bit elements
}

}  // namespace

std::string fused_attention_unsupported(const FusedAttentionShape& shape) {
  if (std::string why = shape_reason(shape); !why.empty()) return why;
  return graphs(shape).unsupported;
}

std::string fused_attention_description(const FusedAttentionShape& shape) {
  if (!shape_reason(shape).empty()) return "";
  return graphs(shape).description;
}

std::size_t fused_attention_forward_workspace_bytes(const FusedAttentionShape& shape) {
  return usable("fused_attention_forward", shape).forward_bytes;
}

std::size_t fused_attention_backward_workspace_bytes(const FusedAttentionShape& shape) {
  return usable("fused_attention_backward", shape).backward_bytes;
}

void fused_attention_forward(const FusedAttentionShape& s, const void* qkv16, void* y16, float* stats, void* workspace,
                             std::size_t workspace_bytes, void* stream) {
  const char* op = "fused_attention_forward";
  const Graphs& g = usable(op, s);
  const detail::AttentionDims dims = detail::attention_dims(op, s.B, s.H, s.T, s.D);
  if (dims.empty()) return;
  detail::require_pointer(op, qkv16, 3 * dims.head_elems, "qkv16");
  detail::require_pointer(op, y16, dims.head_elems, "y16");
  detail::require_pointer(op, stats, dims.heads * s.T, "stats");
  std::unordered_map<std::int64_t, void*> pack = {
      {kQ, offset(qkv16, 0)}, {kK, offset(qkv16, s.D)}, {kV, offset(qkv16, 2 * s.D)}, {kO, y16}, {kStats, stats}};
  execute(op, *g.forward, pack, g.forward_bytes, workspace, workspace_bytes, stream);
}

void fused_attention_backward(const FusedAttentionShape& s, const void* qkv16, const void* y16, const void* dy16,
                              const float* stats, void* dqkv16, void* workspace, std::size_t workspace_bytes,
                              void* stream) {
  const char* op = "fused_attention_backward";
  const Graphs& g = usable(op, s);
  const detail::AttentionDims dims = detail::attention_dims(op, s.B, s.H, s.T, s.D);
  if (dims.empty()) return;
  detail::require_pointer(op, qkv16, 3 * dims.head_elems, "qkv16");
  detail::require_pointer(op, y16, dims.head_elems, "y16");
  detail::require_pointer(op, dy16, dims.head_elems, "dy16");
  detail::require_pointer(op, stats, dims.heads * s.T, "stats");
  detail::require_pointer(op, dqkv16, 3 * dims.head_elems, "dqkv16");
  std::unordered_map<std::int64_t, void*> pack = {
      {kQ, offset(qkv16, 0)},       {kK, offset(qkv16, s.D)},       {kV, offset(qkv16, 2 * s.D)},
      {kO, const_cast<void*>(y16)}, {kDO, const_cast<void*>(dy16)}, {kStats, const_cast<float*>(stats)},
      {kDQ, offset(dqkv16, 0)},     {kDK, offset(dqkv16, s.D)},     {kDV, offset(dqkv16, 2 * s.D)}};
  execute(op, *g.backward, pack, g.backward_bytes, workspace, workspace_bytes, stream);
}

#else  // built without cuDNN's frontend

namespace {
const char* const kNotBuilt =
    "this build of tenax has no cuDNN fused attention: CMake found no cudnn_frontend.h (scripts/install-deps.sh "
    "installs NVIDIA's cudnn-frontend headers; or pass -DTENAX_CUDNN_FRONTEND_INCLUDE_DIR) or no cudnn.h";
[[noreturn]] void not_built(const char* op) {
  throw DeviceError(std::string("tenax::kernels::") + op + ": " + kNotBuilt);
}
}  // namespace

std::string fused_attention_unsupported(const FusedAttentionShape& shape) {
  if (std::string why = shape_reason(shape); !why.empty()) return why;
  return kNotBuilt;
}
std::string fused_attention_description(const FusedAttentionShape&) {
  return "";
}
std::size_t fused_attention_forward_workspace_bytes(const FusedAttentionShape&) {
  not_built("fused_attention_forward");
}
std::size_t fused_attention_backward_workspace_bytes(const FusedAttentionShape&) {
  not_built("fused_attention_backward");
}
void fused_attention_forward(const FusedAttentionShape&, const void*, void*, float*, void*, std::size_t, void*) {
  not_built("fused_attention_forward");
}
void fused_attention_backward(const FusedAttentionShape&, const void*, const void*, const void*, const float*, void*,
                              void*, std::size_t, void*) {
  not_built("fused_attention_backward");
}

#endif

}  // namespace tenax::kernels::cuda
