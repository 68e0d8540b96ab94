// CRC32C (Castagnoli), the checksum stored with every checkpoint block.
//
// Hardware path (SSE4.2 crc32 instruction, chosen at run time): three independent streams per iteration hide the
// instruction's 3-cycle latency, and their results are merged with precomputed "append n zero bytes" tables, so one
// core checksums at close to memory speed. The fused copy + checksum of the staging pass also has a folding kernel
// (carry-less multiplication, VPCLMULQDQ) for CPUs whose crc32 instruction is barely faster than their memory (AMD
// Zen 3). Software fallback: slice-by-8 tables. Whole-buffer checksums delegate to ISA-L when it is installed
// (measured faster); the fused copy + checksum of the staging pass is ours alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace tenax::ckpt {

// Standard CRC32C: crc32c_extend(0, "123456789", 9) == 0xE3069283. Pass a previous result to continue a checksum.
// ISA-L's crc32_iscsi when the build found it (crc32c_uses_isal()), else the in-house path below.
std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size);
// The in-house path: SSE4.2 three-stream loop where available, else the tables (tests and the benchmark compare).
std::uint32_t crc32c_extend_in_house(std::uint32_t crc, const void* data, std::size_t size);
bool crc32c_uses_isal();

// Copies size bytes from src to dst and returns crc32c_extend(crc, src, size), reading src once. Large copies use
// non-temporal stores: dst is staging memory the I/O thread reads later, and bypassing the cache avoids reading dst's
// old contents from memory first (the same trick memcpy uses for large sizes).
std::uint32_t crc32c_copy(void* dst, const void* src, std::size_t size, std::uint32_t crc);

// The fused copy + checksum kernels this CPU can run, in crc32c_copy's order of preference: it takes the first whose
// destination alignment the call meets (the staging buffer's blocks are 4 KiB-aligned, so the first). Tests check
// every one against the tables; benchmarks print the one in use, so that a figure names the code that made it. The
// order rests on measurements of Intel Xeon (AVX-512), AMD Zen 4 (AVX-512) and AMD Zen 3 (AVX2 + VPCLMULQDQ) only:
// other CPUs with VPCLMULQDQ and no AVX-512 (Intel's client cores) take the folding kernel unmeasured.
struct Crc32cCopyKernel {
  const char* name;
  std::size_t destination_alignment;
  // As crc32c_copy; a destination not aligned to destination_alignment is passed on to crc32c_copy.
  std::uint32_t (*copy)(void* dst, const void* src, std::size_t size, std::uint32_t crc);
};
std::span<const Crc32cCopyKernel> crc32c_copy_kernels();
// The name of the kernel crc32c_copy uses for this destination.
const char* crc32c_copy_kernel(const void* dst);
// The kernel of this name in crc32c_copy_kernels() (CheckpointOptions::staging_kernel), or nullptr when this CPU has
// none of that name; "" and "auto" name the first. The entries live as long as the process.
const Crc32cCopyKernel* crc32c_find_copy_kernel(std::string_view name);
// The names of crc32c_copy_kernels(), comma-separated, for messages.
std::string crc32c_copy_kernel_names();
// The name of every copy kernel tenax has on any CPU, in order of preference (TENAX_CKPT_STAGING_KERNEL's values).
std::span<const char* const> crc32c_every_copy_kernel_name();

// The CRC32C of A followed by B, from crc32c_extend(0, A) and crc32c_extend(0, B) and B's length alone: what lets
// pieces of one buffer be checksummed on different threads (staging_pass.hpp). Logarithmic in len_b.
std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b);

// The table-driven path alone (what machines without SSE4.2 use); tests compare both paths with it.
std::uint32_t crc32c_extend_software(std::uint32_t crc, const void* data, std::size_t size);

// The arithmetic of the folding kernel (vpclmulqdq-fold-nt32) in portable code, carry-less products computed bit by
// bit: the same constants and the same steps, without the copy. Slow; for tests, so that hosts without VPCLMULQDQ check
// the fold's constants and reduction against the tables too.
std::uint32_t crc32c_fold_reference(std::uint32_t crc, const void* data, std::size_t size);

// True when the SSE4.2 path is in use.
bool crc32c_hardware();

}  // namespace tenax::ckpt
