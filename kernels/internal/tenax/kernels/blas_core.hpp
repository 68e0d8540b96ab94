// Which OpenBLAS kernels serve the CPU matrix products, and the correction of a CPU that OpenBLAS does not recognise.
//
// OpenBLAS built for every x86 CPU (DYNAMIC_ARCH, as Debian ships it) picks its kernels when it is loaded, from the
// CPU's family and model numbers, and falls back to kernels chosen by the CPU's features for models it does not know.
// Not always: Debian 12's OpenBLAS 0.3.21 takes an Emerald Rapids Xeon (family 6, extended model 12) for a Prescott
// (its model table has no default for that extended model) and runs its SSE3 kernels, about 3x slower here than the
// AVX-512 ones the CPU supports (docs/benchmarks.md). OpenBLAS's remedy is the OPENBLAS_CORETYPE variable, which must
// be set before the library loads; few users know it. So when libtenax_kernels is loaded (a constructor: before any
// product), it compares the kernels OpenBLAS chose with the instruction sets the CPU and the kernel report, and where
// OpenBLAS chose kernels of a lower level it makes OpenBLAS choose again as if OPENBLAS_CORETYPE named the best
// kernels the CPU can run that every OpenBLAS accepts by name (SkylakeX, Haswell, Sandybridge).
//
// Never touched: a choice the user made (OPENBLAS_CORETYPE set), a choice at or above the CPU's level, an OpenBLAS
// built for one CPU (it cannot choose again), a process that already runs threads of its own (libtenax loaded with
// dlopen by a threaded program: choosing again sets an environment variable and briefly leaves OpenBLAS without
// kernels, which another thread could see). blas_core_choice() says what happened and why; the engine logs it.
#pragma once

#include <string>
#include <string_view>

namespace tenax::kernels::cpu {

// Instruction-set levels of OpenBLAS's x86-64 kernel families, in order.
enum class IsaLevel { Sse = 0, Avx = 1, Avx2 = 2, Avx512 = 3 };

// What this CPU and the kernel support (AVX-512 here means F, CD, BW, DQ and VL: what OpenBLAS's SkylakeX kernels use;
// AVX2 means AVX2 and FMA).
IsaLevel this_cpu_isa();

// The level of an OpenBLAS core name as openblas_get_corename() spells it ("Prescott", "Haswell", "SkylakeX", ...),
// compared without case. Names it does not know are Sse: OpenBLAS's generic fallbacks are all SSE kernels.
IsaLevel isa_level_of_openblas_core(std::string_view core);

// The OpenBLAS core to choose instead of `chosen` on a CPU of level `cpu`, or "" when `chosen` stands (it is at or
// above the CPU's level, or the CPU has no AVX). Only names every OpenBLAS since 0.3.x accepts in OPENBLAS_CORETYPE:
// 0.3.21 refuses "Cooperlake" there (for sgemm its kernels are SkylakeX's anyway).
std::string_view openblas_core_to_force(std::string_view chosen, IsaLevel cpu);

// Makes OpenBLAS choose its kernels again as if OPENBLAS_CORETYPE were `core`, and returns the name of the kernels it
// chose. The variable is set only while OpenBLAS chooses. Not thread-safe: call it only while no other thread of the
// process runs (blas_core_choice() checks that) and none can call BLAS. Throws UsageError where this OpenBLAS cannot
// choose again (built for one CPU).
std::string rechoose_openblas_core(std::string_view core);

struct BlasCoreChoice {
  std::string library;        // "OpenBLAS 0.3.21"
  std::string core;           // the kernels in use ("" when they cannot be asked: not an OpenBLAS)
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
