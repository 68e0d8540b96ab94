// The CRC32C kernels for x86 (the SSE4.2 three-stream loops, the folding kernel), ISA-L delegation, and the registry
// of fused copy + checksum kernels. The portable arithmetic they rest on is in crc32c_math.cpp.
#include "checkpoint/crc32c.hpp"

#include "checkpoint/crc32c_math.hpp"

#ifndef TENAX_HAVE_ISAL
#define TENAX_HAVE_ISAL 0
#endif
#if TENAX_HAVE_ISAL
#include <isa-l/crc.h>
#endif

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#define TENAX_CRC32C_X86 1
#else
#define TENAX_CRC32C_X86 0
#endif

namespace tenax::ckpt {
namespace {

using detail::fold_constants;
using detail::FoldConstants;
using detail::soft_update;

#if TENAX_CRC32C_X86
// Bytes per stream per iteration of the three-stream loop. Large enough that the merge is negligible, small enough
// that three streams' source lines stay in L1/L2 while they are read.
constexpr std::size_t kStride = 4096;
// How far ahead the 64-byte copying loop prefetches each stream: the CRC work between loads otherwise keeps too few
// cache misses in flight, and the three streams sit in three pages, which the hardware prefetcher treats separately.
// Measured on an Intel Xeon (2026-11-26), 256 MiB-1 GiB: 384-768 bytes ahead gave 1.00-1.03x of memcpy, none 1.09x,
// 2 KiB 1.12x (T0; NTA 1.53x). The 32-byte loop got slower with it (1.22x -> 1.31x) and has none.
constexpr std::size_t kPrefetchAhead = 512;

// A prefetch may point past the end of the buffer (it never faults); the address is computed as an integer, since a
// pointer that far past the end would be undefined.
inline void prefetch_ahead(const std::uint8_t* p, std::size_t ahead) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(p) + ahead), _MM_HINT_T0);
}

// Applying "append n zero bytes" to a raw CRC register is linear over GF(2): tabulate it byte by byte.
struct ShiftTable {
  std::uint32_t t[4][256];
};

__attribute__((target("sse4.2"))) std::uint32_t hw_zeros(std::uint32_t crc, std::size_t n) {
  std::uint64_t c = crc;
  for (std::size_t i = 0; i < n / 8; ++i)
    c = _mm_crc32_u64(c, 0);
  return static_cast<std::uint32_t>(c);
}

ShiftTable make_shift(std::size_t n) {
  ShiftTable s;
  for (int k = 0; k < 4; ++k)
    for (std::uint32_t b = 0; b < 256; ++b)
      s.t[k][b] = hw_zeros(b << (8 * k), n);
  return s;
}

struct HwTables {
  ShiftTable one = make_shift(kStride);
  ShiftTable two = make_shift(2 * kStride);
};

const HwTables& hw_tables() {
  static const HwTables tables;
  return tables;
}

inline std::uint32_t shift(const ShiftTable& s, std::uint32_t c) {
  return s.t[0][c & 0xff] ^ s.t[1][(c >> 8) & 0xff] ^ s.t[2][(c >> 16) & 0xff] ^ s.t[3][c >> 24];
}

// crc(A|B|C) for three kStride-long streams: zeros_2L(crc(A)) ^ zeros_L(crc0(B)) ^ crc0(C) (the raw register is linear
// in its input).
inline std::uint32_t merge_streams(const HwTables& tables, std::uint64_t c0, std::uint64_t c1, std::uint64_t c2) {
  return shift(tables.two, static_cast<std::uint32_t>(c0)) ^ shift(tables.one, static_cast<std::uint32_t>(c1)) ^
         static_cast<std::uint32_t>(c2);
}

__attribute__((target("sse4.2"))) std::uint32_t hw_tail(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
  std::uint64_t c = crc;
  while (n >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  std::uint32_t c32 = static_cast<std::uint32_t>(c);
  while (n--)
    c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

__attribute__((target("sse4.2"))) std::uint32_t hw_update(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
  const HwTables& tables = hw_tables();
  while (n >= 3 * kStride) {
    std::uint64_t c0 = crc, c1 = 0, c2 = 0;
    const std::uint8_t* p1 = p + kStride;
    const std::uint8_t* p2 = p + 2 * kStride;
    for (std::size_t i = 0; i < kStride; i += 8) {
      std::uint64_t a, b, c;
      std::memcpy(&a, p + i, 8);
      std::memcpy(&b, p1 + i, 8);
      std::memcpy(&c, p2 + i, 8);
      c0 = _mm_crc32_u64(c0, a);
      c1 = _mm_crc32_u64(c1, b);
      c2 = _mm_crc32_u64(c2, c);
    }
    crc = merge_streams(tables, c0, c1, c2);
    p += 3 * kStride;
    n -= 3 * kStride;
  }
  return hw_tail(crc, p, n);
}

__attribute__((target("sse4.2"))) std::uint32_t hw_copy(std::uint32_t crc, std::uint8_t* d, const std::uint8_t* p,
                                                        std::size_t n) {
  const HwTables& tables = hw_tables();
  const bool streamed = n >= 3 * kStride;
  while (n >= 3 * kStride) {
    std::uint64_t c0 = crc, c1 = 0, c2 = 0;
    const std::uint8_t* p1 = p + kStride;
    const std::uint8_t* p2 = p + 2 * kStride;
    long long* d0 = reinterpret_cast<long long*>(d);
    long long* d1 = reinterpret_cast<long long*>(d + kStride);
    long long* d2 = reinterpret_cast<long long*>(d + 2 * kStride);
    for (std::size_t i = 0; i < kStride; i += 8) {
      std::uint64_t a, b, c;
      std::memcpy(&a, p + i, 8);
      std::memcpy(&b, p1 + i, 8);
      std::memcpy(&c, p2 + i, 8);
      c0 = _mm_crc32_u64(c0, a);
      c1 = _mm_crc32_u64(c1, b);
      c2 = _mm_crc32_u64(c2, c);
      _mm_stream_si64(d0 + i / 8, static_cast<long long>(a));
      _mm_stream_si64(d1 + i / 8, static_cast<long long>(b));
      _mm_stream_si64(d2 + i / 8, static_cast<long long>(c));
    }
    crc = merge_streams(tables, c0, c1, c2);
    p += 3 * kStride;
    d += 3 * kStride;
    n -= 3 * kStride;
  }
  // Non-temporal stores are weakly ordered: fence so the I/O thread, handed this buffer next, sees every byte.
  if (streamed) _mm_sfence();
  std::memcpy(d, p, n);
  return hw_tail(crc, p, n);
}

// The same three streams with 32-byte non-temporal stores: with 8-byte movnti the stores, not the CRC, become the
// limit on large copies (the write-combining buffers fill a quarter as fast). vmovntdq needs a 32-byte aligned
// destination, which the staging buffer's 4 KiB-aligned blocks always are.
__attribute__((target("sse4.2,avx2"))) std::uint32_t hw_copy_avx2(std::uint32_t crc, std::uint8_t* d,
                                                                  const std::uint8_t* p, std::size_t n) {
  const HwTables& tables = hw_tables();
  const bool streamed = n >= 3 * kStride;
  while (n >= 3 * kStride) {
    std::uint64_t c0 = crc, c1 = 0, c2 = 0;
    const std::uint8_t* p1 = p + kStride;
    const std::uint8_t* p2 = p + 2 * kStride;
    for (std::size_t i = 0; i < kStride; i += 32) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1 + i));
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p2 + i));
      for (std::size_t k = 0; k < 32; k += 8) {
        std::uint64_t x, y, z;
        std::memcpy(&x, p + i + k, 8);
        std::memcpy(&y, p1 + i + k, 8);
        std::memcpy(&z, p2 + i + k, 8);
        c0 = _mm_crc32_u64(c0, x);
        c1 = _mm_crc32_u64(c1, y);
        c2 = _mm_crc32_u64(c2, z);
      }
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), a);
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + kStride + i), b);
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 2 * kStride + i), c);
    }
    crc = merge_streams(tables, c0, c1, c2);
    p += 3 * kStride;
    d += 3 * kStride;
    n -= 3 * kStride;
  }
  if (streamed) _mm_sfence();  // as in hw_copy
  std::memcpy(d, p, n);
  return hw_tail(crc, p, n);
}

// The same three streams with 64-byte non-temporal stores, one whole cache line each: measured on an Intel Xeon with
// 260 MiB of L3 (2026-11-26), a copy of three interleaved pages reaches glibc's memcpy from 256 MiB up (0.95-0.97x)
// with 64-byte stores and stays 1.08-1.14x behind it with 32-byte ones, whatever the page interleave or prefetching.
// vmovntdq zmm needs a 64-byte aligned destination (the staging blocks are 4 KiB-aligned).
__attribute__((target("sse4.2,avx512f"))) std::uint32_t hw_copy_avx512(std::uint32_t crc, std::uint8_t* d,
                                                                       const std::uint8_t* p, std::size_t n) {
  const HwTables& tables = hw_tables();
  const bool streamed = n >= 3 * kStride;
  while (n >= 3 * kStride) {
    std::uint64_t c0 = crc, c1 = 0, c2 = 0;
    const std::uint8_t* p1 = p + kStride;
    const std::uint8_t* p2 = p + 2 * kStride;
    for (std::size_t i = 0; i < kStride; i += 64) {
      prefetch_ahead(p, i + kPrefetchAhead);
      prefetch_ahead(p1, i + kPrefetchAhead);
      prefetch_ahead(p2, i + kPrefetchAhead);
      const __m512i a = _mm512_loadu_si512(p + i);
      const __m512i b = _mm512_loadu_si512(p1 + i);
      const __m512i c = _mm512_loadu_si512(p2 + i);
      for (std::size_t k = 0; k < 64; k += 8) {
        std::uint64_t x, y, z;
        std::memcpy(&x, p + i + k, 8);
        std::memcpy(&y, p1 + i + k, 8);
        std::memcpy(&z, p2 + i + k, 8);
        c0 = _mm_crc32_u64(c0, x);
        c1 = _mm_crc32_u64(c1, y);
        c2 = _mm_crc32_u64(c2, z);
      }
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), a);
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + kStride + i), b);
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + 2 * kStride + i), c);
    }
    crc = merge_streams(tables, c0, c1, c2);
    p += 3 * kStride;
    d += 3 * kStride;
    n -= 3 * kStride;
  }
  if (streamed) _mm_sfence();  // as in hw_copy
  std::memcpy(d, p, n);
  return hw_tail(crc, p, n);
}

// Folding with carry-less multiplication (VPCLMULQDQ on 256-bit registers), one sequential stream, 32-byte
// non-temporal stores. Measured on an AMD EPYC without AVX-512 (Zen 3, 2026-11-29): the three-stream crc32 loop
// checksums data already in L1 at only 14.6-15.8 GB/s, barely above what memory delivers there (memcpy 11-15 GB/s), so
// the three-stream loops stay behind memcpy: the checksum alone takes 1.01-1.13x of memcpy's time and the 32-byte
// copying loop 1.26-1.31x, where this loop takes 0.92-1.02x at 256 MiB-1 GiB (a copy alone with the same stores, no
// checksum: 0.91-0.94x).
//
// The message is folded 128 bytes at a time into four registers, eight 128-bit lanes. In the bit-reflected
// representation a lane R is L * x^64 + H (L its low quadword, H its high one), and a carry-less product of two
// quadwords is the polynomial product times x, so moving R forward by D bits, R * x^D mod P, is
// clmul(L, x^(D+63) mod P) ^ clmul(H, x^(D-1) mod P): a 96-bit result that fits the lane. At the end the lanes are
// moved to the last one's place and its 16 bytes go through the crc32 instruction from 0, which is exactly R * x^32
// mod P, the CRC register of everything folded.
// The same steps run in portable code (crc32c_math.cpp, fold_reference), so that every host tests the constants.
// Prefetching ahead: 1.13x of memcpy without, 1.05-1.08x at 1 KiB, 0.97-1.05x at 1.5-3 KiB (one block per
// iteration); with two blocks per iteration 3 KiB was 0.92-1.02x, 2 KiB 0.96-1.01x (same machine, 256 MiB-1 GiB).
constexpr std::size_t kFoldPrefetchAhead = 3072;

__attribute__((target("sse4.2,avx2,pclmul,vpclmulqdq"))) inline __m256i fold_256(__m256i acc, __m256i k, __m256i data) {
  const __m256i low = _mm256_clmulepi64_epi128(acc, k, 0x00);
  const __m256i high = _mm256_clmulepi64_epi128(acc, k, 0x11);
  return _mm256_xor_si256(_mm256_xor_si256(low, high), data);
}

__attribute__((target("avx2"))) inline __m256i load_32(const std::uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

__attribute__((target("avx2"))) inline void stream_32(std::uint8_t* d, __m256i v) {
  _mm256_stream_si256(reinterpret_cast<__m256i*>(d), v);
}

__attribute__((target("sse4.2,avx2,pclmul,vpclmulqdq"))) std::uint32_t hw_copy_fold(std::uint32_t crc, std::uint8_t* d,
                                                                                    const std::uint8_t* p,
                                                                                    std::size_t n) {
  constexpr std::size_t kBlock = 128;
  if (n < 2 * kBlock) {
    std::memcpy(d, p, n);
    return hw_tail(crc, p, n);
  }
  const FoldConstants& k = fold_constants();
  const __m256i by_1024 = _mm256_load_si256(reinterpret_cast<const __m256i*>(k.by_1024));
  __m256i a0 = load_32(p), a1 = load_32(p + 32), a2 = load_32(p + 64), a3 = load_32(p + 96);
  stream_32(d, a0);
  stream_32(d + 32, a1);
  stream_32(d + 64, a2);
  stream_32(d + 96, a3);
  // The register so far enters as the first 32 bits of the message (the CRC is linear in both).
  a0 = _mm256_xor_si256(a0, _mm256_set_epi32(0, 0, 0, 0, 0, 0, 0, static_cast<int>(crc)));
  std::size_t i = kBlock;
  // Two blocks per iteration: their eight loads go out before the first fold needs one (figures at
  // kFoldPrefetchAhead).
  for (; i + 2 * kBlock <= n; i += 2 * kBlock) {
    for (std::size_t line = 0; line < 2 * kBlock; line += 64)
      prefetch_ahead(p, i + kFoldPrefetchAhead + line);
    const __m256i b0 = load_32(p + i), b1 = load_32(p + i + 32), b2 = load_32(p + i + 64), b3 = load_32(p + i + 96);
    const __m256i c0 = load_32(p + i + 128), c1 = load_32(p + i + 160), c2 = load_32(p + i + 192),
                  c3 = load_32(p + i + 224);
    stream_32(d + i, b0);
    stream_32(d + i + 32, b1);
    stream_32(d + i + 64, b2);
    stream_32(d + i + 96, b3);
    stream_32(d + i + 128, c0);
    stream_32(d + i + 160, c1);
    stream_32(d + i + 192, c2);
    stream_32(d + i + 224, c3);
    a0 = fold_256(fold_256(a0, by_1024, b0), by_1024, c0);
    a1 = fold_256(fold_256(a1, by_1024, b1), by_1024, c1);
    a2 = fold_256(fold_256(a2, by_1024, b2), by_1024, c2);
    a3 = fold_256(fold_256(a3, by_1024, b3), by_1024, c3);
  }
  if (i + kBlock <= n) {
    const __m256i b0 = load_32(p + i), b1 = load_32(p + i + 32), b2 = load_32(p + i + 64), b3 = load_32(p + i + 96);
    stream_32(d + i, b0);
    stream_32(d + i + 32, b1);
    stream_32(d + i + 64, b2);
    stream_32(d + i + 96, b3);
    a0 = fold_256(a0, by_1024, b0);
    a1 = fold_256(a1, by_1024, b1);
    a2 = fold_256(a2, by_1024, b2);
    a3 = fold_256(a3, by_1024, b3);
    i += kBlock;
  }
  _mm_sfence();  // as in hw_copy

  const __m128i lanes[8] = {_mm256_castsi256_si128(a0), _mm256_extracti128_si256(a0, 1),
                            _mm256_castsi256_si128(a1), _mm256_extracti128_si256(a1, 1),
                            _mm256_castsi256_si128(a2), _mm256_extracti128_si256(a2, 1),
                            _mm256_castsi256_si128(a3), _mm256_extracti128_si256(a3, 1)};
  __m128i last = lanes[7];
  for (int lane = 0; lane < 7; ++lane) {
    const __m128i kl = _mm_load_si128(reinterpret_cast<const __m128i*>(k.to_last_lane[lane]));
    last = _mm_xor_si128(
        last, _mm_xor_si128(_mm_clmulepi64_si128(lanes[lane], kl, 0x00), _mm_clmulepi64_si128(lanes[lane], kl, 0x11)));
  }
  std::uint64_t c = _mm_crc32_u64(0, static_cast<std::uint64_t>(_mm_cvtsi128_si64(last)));
  c = _mm_crc32_u64(c, static_cast<std::uint64_t>(_mm_extract_epi64(last, 1)));
  std::memcpy(d + i, p + i, n - i);
  return hw_tail(static_cast<std::uint32_t>(c), p + i, n - i);
}

bool detect_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

bool detect_hardware() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}

bool detect_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}

bool detect_vpclmulqdq() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("vpclmulqdq");
}
#endif

}  // namespace

bool crc32c_hardware() {
#if TENAX_CRC32C_X86
  static const bool hw = detect_hardware();
  return hw;
#else
  return false;
#endif
}

std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size) {
#if TENAX_HAVE_ISAL
  // ISA-L's state is the register before the final inversion, as ours; it chooses its fastest kernel at run time.
  // Its length is an int: a larger buffer goes in 1 GiB pieces.
  constexpr std::size_t kPiece = std::size_t{1} << 30;
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  std::uint32_t state = ~crc;
  for (std::size_t done = 0; done < size; done += kPiece) {
    const std::size_t n = size - done < kPiece ? size - done : kPiece;
    state = crc32_iscsi(p + done, static_cast<int>(n), state);
  }
  return ~state;
#else
  return crc32c_extend_in_house(crc, data, size);
#endif
}

std::uint32_t crc32c_extend_in_house(std::uint32_t crc, const void* data, std::size_t size) {
  const auto* p = static_cast<const std::uint8_t*>(data);
#if TENAX_CRC32C_X86
  if (crc32c_hardware()) return ~hw_update(~crc, p, size);
#endif
  return ~soft_update(~crc, p, size);
}

bool crc32c_uses_isal() {
  return TENAX_HAVE_ISAL != 0;
}

namespace {

// Software: checksum each cache-sized piece right after copying it, while it is still in cache.
std::uint32_t soft_copy(std::uint32_t crc, std::uint8_t* d, const std::uint8_t* p, std::size_t size) {
  constexpr std::size_t kPiece = 64 * 1024;
  for (std::size_t done = 0; done < size; done += kPiece) {
    std::size_t n = size - done < kPiece ? size - done : kPiece;
    std::memcpy(d + done, p + done, n);
    crc = soft_update(crc, d + done, n);
  }
  return crc;
}

// A raw-register kernel (no pre/post inversion) as crc32c_copy's signature. A destination the kernel's stores cannot
// take goes to crc32c_copy, which picks one that can, rather than faulting.
template <std::uint32_t (*Raw)(std::uint32_t, std::uint8_t*, const std::uint8_t*, std::size_t), std::size_t Alignment>
std::uint32_t standard(void* dst, const void* src, std::size_t size, std::uint32_t crc) {
  if (size == 0) return crc;  // an empty copy may come with null pointers, which memcpy must never be given
  if (reinterpret_cast<std::uintptr_t>(dst) % Alignment != 0) return crc32c_copy(dst, src, size, crc);
  return ~Raw(~crc, static_cast<std::uint8_t*>(dst), static_cast<const std::uint8_t*>(src), size);
}

// Every kernel's name, in the order of preference below; crc32c_every_copy_kernel_name() gives them to the test that
// holds TENAX_CKPT_STAGING_KERNEL's values to them.
constexpr std::array<const char*, 5> kCopyKernelNames = {"crc32-3x-nt64", "vpclmulqdq-fold-nt32", "crc32-3x-nt32",
                                                         "crc32-3x-nt8", "tables"};

// Fixed storage, trivially destructible: a staging thread may still copy while the process exits.
struct CopyKernels {
  std::array<Crc32cCopyKernel, 5> kernels{};
  std::size_t count = 0;
  void push_back(const Crc32cCopyKernel& kernel) { kernels[count++] = kernel; }
};

CopyKernels detect_copy_kernels() {
  CopyKernels kernels;
#if TENAX_CRC32C_X86
  if (crc32c_hardware()) {
    // Order of preference, from the measurements next to each kernel: 64-byte stores where AVX-512 exists (Intel Xeon
    // 1.01x of memcpy, AMD Zen 4 0.97-0.98x), folding where 256-bit VPCLMULQDQ exists (AMD Zen 3, from 256 MiB up:
    // 0.92-1.03x of memcpy against 1.12-1.20x for the 32-byte three-stream loop, tenax-bench-crc), then the crc32
    // instruction with 32- and 8-byte stores.
    if (detect_avx512()) kernels.push_back({kCopyKernelNames[0], 64, standard<hw_copy_avx512, 64>});
    if (detect_vpclmulqdq()) kernels.push_back({kCopyKernelNames[1], 32, standard<hw_copy_fold, 32>});
    if (detect_avx2()) kernels.push_back({kCopyKernelNames[2], 32, standard<hw_copy_avx2, 32>});
    kernels.push_back({kCopyKernelNames[3], 1, standard<hw_copy, 1>});
  }
#endif
  kernels.push_back({kCopyKernelNames[4], 1, standard<soft_copy, 1>});
  return kernels;
}

const Crc32cCopyKernel& kernel_for(const void* dst) {
  const std::span<const Crc32cCopyKernel> kernels = crc32c_copy_kernels();
  for (const Crc32cCopyKernel& kernel : kernels)
    if (reinterpret_cast<std::uintptr_t>(dst) % kernel.destination_alignment == 0) return kernel;
  return kernels.back();  // the tables take any destination
}

}  // namespace

std::span<const Crc32cCopyKernel> crc32c_copy_kernels() {
  static const CopyKernels detected = detect_copy_kernels();
  return {detected.kernels.data(), detected.count};
}

const char* crc32c_copy_kernel(const void* dst) {
  return kernel_for(dst).name;
}

const Crc32cCopyKernel* crc32c_find_copy_kernel(std::string_view name) {
  const std::span<const Crc32cCopyKernel> kernels = crc32c_copy_kernels();
  if (name.empty() || name == "auto") return &kernels.front();
  for (const Crc32cCopyKernel& kernel : kernels)
    if (name == kernel.name) return &kernel;
  return nullptr;
}

std::span<const char* const> crc32c_every_copy_kernel_name() {
  return kCopyKernelNames;
}

std::string crc32c_copy_kernel_names() {
  std::string names;
  for (const Crc32cCopyKernel& kernel : crc32c_copy_kernels())
    names += (names.empty() ? "" : ", ") + std::string(kernel.name);
  return names;
}

std::uint32_t crc32c_copy(void* dst, const void* src, std::size_t size, std::uint32_t crc) {
  return kernel_for(dst).copy(dst, src, size, crc);
}

}  // namespace tenax::ckpt
