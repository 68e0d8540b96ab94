// Which OpenBLAS kernels serve the CPU matrix products, and the correction of a CPU that OpenBLAS does not recognise.
//
// OpenBLAS built for every x86 CPU (DYNAMIC_ARCH, as Debian ships it) picks its kernels when it is loaded, from the
// CPU's family and model numbers. A model newer than the library falls back to its oldest SSE3 kernels ("Prescott"):
// Debian 12's OpenBLAS 0.3.21 on an Emerald Rapids Xeon (family 6, model 207) runs its matrix products about 3x slower
// than with the AVX-512 kernels the CPU supports (docs/benchmarks.md). OpenBLAS's own remedy is the
// OPENBLAS_CORETYPE variable, which must be set before the library loads; few users know it. So when libtenax_kernels
// is loaded (a constructor: before any product and while the process has one thread of its own), it compares the
// kernels OpenBLAS chose with the instruction sets the CPU and the kernel report, and where OpenBLAS chose kernels of a
// lower level it makes OpenBLAS choose again as if OPENBLAS_CORETYPE named the best kernels the CPU can run.
//
// Never touched: a choice the user made (OPENBLAS_CORETYPE set), a choice at or above the CPU's level, an OpenBLAS
// built for one CPU (it cannot choose again), a BLAS other than OpenBLAS. blas_core_choice() says what happened; the
// engine logs it.
#pragma once

#include <string>
#include <string_view>

namespace tenax::kernels::cpu {

// Instruction-set levels of OpenBLAS's x86-64 kernel families, in order.
enum class IsaLevel { Sse = 0, Avx = 1, Avx2 = 2, Avx512 = 3 };

struct CpuIsa {
  IsaLevel level = IsaLevel::Sse;
  bool avx512_bf16 = false;  // OpenBLAS's Cooperlake kernels (SkylakeX's plus bf16 products) need it
};

// What this CPU and the kernel support (AVX-512 here means F, CD, BW, DQ and VL: what OpenBLAS's SkylakeX kernels use;
// AVX2 means AVX2 and FMA).
CpuIsa this_cpu_isa();

// The level of an OpenBLAS core name as openblas_get_corename() spells it ("Prescott", "Haswell", "SkylakeX", ...),
// compared without case. Names it does not know are Sse: OpenBLAS's generic fallbacks are all SSE kernels.
IsaLevel isa_level_of_openblas_core(std::string_view core);

// The OpenBLAS core to choose instead of `chosen` on a CPU with `cpu`, or "" when `chosen` stands (it is at or above
// the CPU's level, or the CPU has no AVX).
std::string_view openblas_core_to_force(std::string_view chosen, const CpuIsa& cpu);

struct BlasCoreChoice {
  std::string library;        // "OpenBLAS 0.3.21", or what the BLAS is when it is not OpenBLAS
  std::string core;           // the kernels in use ("" when not OpenBLAS)
  std::string detected_core;  // what OpenBLAS chose by itself
  bool set_by_user = false;   // OPENBLAS_CORETYPE was set: OpenBLAS's choice is the user's
  bool corrected = false;     // tenax made OpenBLAS choose `core` instead of `detected_core`
  std::string problem;        // why a needed correction could not be made ("" when none)
};

// Made once, when the library loads; the same object afterwards.
const BlasCoreChoice& blas_core_choice();

// One line for logs and benchmark headers: "OpenBLAS 0.3.21, SkylakeX kernels" and, where it applies, how they were
// chosen ("chosen by tenax: OpenBLAS took this CPU (family 6 model 207) for a Prescott"), or the problem.
std::string describe(const BlasCoreChoice& choice);

}  // namespace tenax::kernels::cpu
