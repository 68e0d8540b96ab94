// The portable arithmetic of CRC32C (crc32c_math.hpp), and the public functions made of it alone: the table-driven
// checksum, the fold's portable reference and the combination of two checksums.
#include "checkpoint/crc32c_math.hpp"

#include "checkpoint/crc32c.hpp"

#include <array>
#include <bit>
#include <cstring>

namespace tenax::ckpt {
namespace detail {
namespace {

constexpr std::uint32_t kPoly = 0x82F63B78u;  // CRC32C, bit-reflected

struct SoftTables {
  std::uint32_t t[8][256];
  SoftTables() {
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][i] = c;
    }
    for (std::uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s)
        t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
};

const SoftTables& soft_tables() {
  static const SoftTables tables;
  return tables;
}

// x^(2^k) mod P for k = 0..63, so that x^n is a product of at most 64 table entries.
struct PowerTable {
  std::array<std::uint32_t, 64> x2k{};
  PowerTable() {
    std::uint32_t p = 1u << 30;  // x^1
    for (auto& entry : x2k) {
      entry = p;
      p = multiply_mod_p(p, p);
    }
  }
};

// x^n mod P as the high half of a bit-reflected quadword (the operand layout of the fold).
std::uint64_t fold_constant(std::uint64_t n) {
  return std::uint64_t{x_to_the_mod_p(n)} << 32;
}

// A carry-less product of two quadwords, as PCLMULQDQ computes it: {low quadword, high quadword}.
std::array<std::uint64_t, 2> carry_less_multiply(std::uint64_t a, std::uint64_t b) {
  std::uint64_t low = 0, high = 0;
  for (int bit = 0; bit < 64; ++bit)
    if ((b >> bit) & 1) {
      low ^= a << bit;
      if (bit != 0) high ^= a >> (64 - bit);
    }
  return {low, high};
}

// A 128-bit lane as the kernel loads it: {bytes 0-7, bytes 8-15}, little-endian whatever the host's order.
using Lane = std::array<std::uint64_t, 2>;

Lane load_lane(const std::uint8_t* p) {
  Lane lane{};
  for (int half = 0; half < 2; ++half)
    for (int byte = 7; byte >= 0; --byte)
      lane[half] = (lane[half] << 8) | p[8 * half + byte];
  return lane;
}

// The lane moved forward by D bits, given k = {x^(D+63), x^(D-1)} mod P: what the kernel's fold_256 does per lane,
// before the XOR.
Lane move_lane(const Lane& lane, const std::uint64_t* k) {
  const auto low = carry_less_multiply(lane[0], k[0]);
  const auto high = carry_less_multiply(lane[1], k[1]);
  return {low[0] ^ high[0], low[1] ^ high[1]};
}

// The folding kernel's checksum (crc32c.cpp, hw_copy_fold; its comment has the arithmetic) in portable code, without
// the copy, so that every host tests the constants and the steps, not only hosts with VPCLMULQDQ. One block per step
// where the kernel takes two (the same sum: each block folds the lanes forward by 1024 bits).
std::uint32_t fold_reference(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
  constexpr std::size_t kBlock = 128;
  if (n < 2 * kBlock) return soft_update(crc, p, n);
  const FoldConstants& k = fold_constants();
  std::array<Lane, 8> lanes;
  for (std::size_t lane = 0; lane < 8; ++lane)
    lanes[lane] = load_lane(p + 16 * lane);
  lanes[0][0] ^= crc;
  std::size_t i = kBlock;
  for (; i + kBlock <= n; i += kBlock)
    for (std::size_t lane = 0; lane < 8; ++lane) {
      const Lane moved = move_lane(lanes[lane], k.by_1024), data = load_lane(p + i + 16 * lane);
      lanes[lane] = {moved[0] ^ data[0], moved[1] ^ data[1]};
    }
  Lane last = lanes[7];
  for (std::size_t lane = 0; lane < 7; ++lane) {
    const Lane moved = move_lane(lanes[lane], k.to_last_lane[lane]);
    last = {last[0] ^ moved[0], last[1] ^ moved[1]};
  }
  std::uint8_t bytes[16];
  for (int byte = 0; byte < 16; ++byte)
    bytes[byte] = static_cast<std::uint8_t>(last[byte / 8] >> (8 * (byte % 8)));
  return soft_update(soft_update(0, bytes, 16), p + i, n - i);
}

}  // namespace

// It reads 8 bytes as one word, low byte first.
static_assert(std::endian::native == std::endian::little, "the slice-by-8 loop reads words little-endian");
std::uint32_t soft_update(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
  const auto& t = soft_tables().t;
  while (n >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    v ^= crc;
    crc = t[7][v & 0xff] ^ t[6][(v >> 8) & 0xff] ^ t[5][(v >> 16) & 0xff] ^ t[4][(v >> 24) & 0xff] ^
          t[3][(v >> 32) & 0xff] ^ t[2][(v >> 40) & 0xff] ^ t[1][(v >> 48) & 0xff] ^ t[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n--)
    crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
  return crc;
}

// Appending n zero bytes to a message multiplies its CRC register by x^(8n), so crc(A|B) is crc(A) times x^(8|B|),
// plus crc(B) (the pre- and post-inversions cancel between the two terms): what crc32c_combine computes.
std::uint32_t multiply_mod_p(std::uint32_t a, std::uint32_t b) {
  std::uint32_t product = 0;
  for (std::uint32_t bit = 1u << 31; bit != 0; bit >>= 1) {
    if (a & bit) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;  // b *= x
  }
  return product;
}

std::uint32_t x_to_the_mod_p(std::uint64_t n) {
  static const PowerTable table;
  std::uint32_t p = 1u << 31;  // x^0
  for (int k = 0; n != 0; n >>= 1, ++k)
    if (n & 1) p = multiply_mod_p(table.x2k[k], p);
  return p;
}

FoldConstants::FoldConstants() {
  by_1024[0] = by_1024[2] = fold_constant(1024 + 63);
  by_1024[1] = by_1024[3] = fold_constant(1024 - 1);
  for (std::uint64_t lane = 0; lane < 7; ++lane) {
    to_last_lane[lane][0] = fold_constant(128 * (7 - lane) + 63);
    to_last_lane[lane][1] = fold_constant(128 * (7 - lane) - 1);
  }
}

const FoldConstants& fold_constants() {
  static const FoldConstants constants;
  return constants;
}

}  // namespace detail

std::uint32_t crc32c_extend_software(std::uint32_t crc, const void* data, std::size_t size) {
  return ~detail::soft_update(~crc, static_cast<const std::uint8_t*>(data), size);
}

std::uint32_t crc32c_fold_reference(std::uint32_t crc, const void* data, std::size_t size) {
  return ~detail::fold_reference(~crc, static_cast<const std::uint8_t*>(data), size);
}

std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b) {
  if (len_b == 0) return crc_a;
  // 8 * len_b may exceed 64 bits for absurd lengths only; x^(8n) = (x^n)^8 keeps the exponent in range.
  std::uint32_t shift = detail::x_to_the_mod_p(len_b);
  for (int i = 0; i < 3; ++i)
    shift = detail::multiply_mod_p(shift, shift);
  return detail::multiply_mod_p(shift, crc_a) ^ crc_b;
}

}  // namespace tenax::ckpt
