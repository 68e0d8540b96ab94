// The portable polynomial arithmetic behind CRC32C (crc32c.hpp): the slice-by-8 tables, powers of x modulo the
// polynomial, and the constants of the folding kernel. crc32c.cpp's kernels build on it; nothing here needs a
// particular CPU. All functions work on the raw register (no pre- or post-inversion).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tenax::ckpt::detail {

// The register after appending n bytes at p, by the slice-by-8 tables (any CPU; little-endian hosts).
std::uint32_t soft_update(std::uint32_t crc, const std::uint8_t* p, std::size_t n);

// Products and powers modulo the CRC32C polynomial in the CRC's bit-reflected representation (x^0 is the top bit).
std::uint32_t multiply_mod_p(std::uint32_t a, std::uint32_t b);
std::uint32_t x_to_the_mod_p(std::uint64_t n);

// The folding kernel's constants: x^n mod P as the high half of a bit-reflected quadword, {x^(D+63), x^(D-1)} per
// 128-bit lane, for D = 1024 (one 128-byte block; the loop) and D = 128 * (7 - lane) (the final reduction onto the
// last lane). Aligned for the kernel's vector loads. Computed once, on first use; thread-safe.
struct FoldConstants {
  alignas(32) std::uint64_t by_1024[4];
  alignas(16) std::uint64_t to_last_lane[7][2];
  FoldConstants();
};
const FoldConstants& fold_constants();

}  // namespace tenax::ckpt::detail
