// TENAX_CPU_CLONES: compile a CPU kernel once per x86-64 level (AVX-512, AVX2, the SSE2 baseline) and run the one the
// CPU supports, chosen once when the library loads (GCC's function multiversioning through an ifunc).
//
// Why: the library is built for the baseline every x86-64 CPU runs, so its vectorised loops are 4 floats wide; the
// exp-heavy kernels (GeLU, the softmax cross-entropy) and the optimizer steps are compute-bound and run several times
// faster 16 wide. Results do not change: each clone vectorises the same loops element for element, the library is
// built with -ffp-contract=off (GCC would otherwise fuse a * b + c into one FMA in the clones that have FMA, rounding
// once instead of twice) and without -ffast-math (no sum is reordered), so every clone computes the same bits
// (tests/kernels/cpu_clones_test.cpp).
//
// GCC 12 or newer only (older GCC does not take the arch=x86-64-vN levels in target_clones). Clang builds (the
// sanitizer build) and other architectures run the baseline code: clang wants the attribute on every declaration and
// does not take it on templates, which the optimizer loops are.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && __GNUC__ >= 12
#define TENAX_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TENAX_CPU_CLONES
#endif
