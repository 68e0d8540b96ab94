// The staging pass: CRC32C joined from pieces equals the whole buffer's, and the pass spread over threads copies every
// byte and gives exactly the single-threaded checksums, whatever the sizes (empty, unaligned, piece-sized, several
// pieces) and over repeated saves.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "checkpoint/crc32c.hpp"
#include "checkpoint/staging_pass.hpp"

namespace tenax::ckpt {
namespace {

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> v(n);
  std::mt19937_64 rng(seed);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t word = rng();
    std::memcpy(v.data() + i, &word, 8);
  }
  for (; i < n; ++i)
    v[i] = static_cast<std::uint8_t>(rng());
  return v;
}

TEST(CheckpointCrc32cCombine, JoinsAnySplitOfABuffer) {
  const std::vector<std::uint8_t> data = random_bytes(70000, 1);
  const std::uint32_t whole = crc32c_extend(0, data.data(), data.size());
  for (std::size_t split : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{4096}, std::size_t{33333},
                            data.size() - 1, data.size()}) {
    const std::uint32_t a = crc32c_extend(0, data.data(), split);
    const std::uint32_t b = crc32c_extend(0, data.data() + split, data.size() - split);
    EXPECT_EQ(crc32c_combine(a, b, data.size() - split), whole) << "split at " << split;
  }
  // Three pieces, joined left to right, as the staging pass joins its pieces.
  const std::uint32_t p1 = crc32c_extend(0, data.data(), 1000);
  const std::uint32_t p2 = crc32c_extend(0, data.data() + 1000, 50000);
  const std::uint32_t p3 = crc32c_extend(0, data.data() + 51000, data.size() - 51000);
  EXPECT_EQ(crc32c_combine(crc32c_combine(p1, p2, 50000), p3, data.size() - 51000), whole);
  // Appending zeros: the CRC of n zero bytes joined the same way.
  const std::vector<std::uint8_t> zeros(4096, 0);
  EXPECT_EQ(crc32c_combine(crc32c_extend(0, data.data(), 10), crc32c_extend(0, zeros.data(), 4096), 4096),
            crc32c_extend(crc32c_extend(0, data.data(), 10), zeros.data(), 4096));
  // Joining is associative whatever the lengths, also past 4 GiB where the power table's high entries are used: a wrong
  // entry breaks one side of the equation.
  const std::uint32_t a = 0x12345678u, b = 0x9abcdef0u, c = 0x0fedcba9u;
  for (std::uint64_t l1 : {std::uint64_t{1}, std::uint64_t{4096}, std::uint64_t{3} << 31, (std::uint64_t{1} << 40) + 7})
    for (std::uint64_t l2 : {std::uint64_t{5}, std::uint64_t{1} << 32, (std::uint64_t{1} << 35) + 12345})
      EXPECT_EQ(crc32c_combine(crc32c_combine(a, b, l1), c, l2), crc32c_combine(a, crc32c_combine(b, c, l2), l1 + l2))
          << l1 << " + " << l2;
  // Two equal lengths 2^k joined as one of 2^(k+1): each power table entry checked against the one below it.
  for (int k = 0; k < 62; ++k) {
    const std::uint64_t l = std::uint64_t{1} << k;
    EXPECT_EQ(crc32c_combine(crc32c_combine(a, b, l), c, l), crc32c_combine(a, crc32c_combine(b, c, l), 2 * l))
        << "2^" << k << " twice";
  }
}

struct Buffers {
  std::vector<std::vector<std::uint8_t>> src;
  std::unique_ptr<std::uint8_t[], void (*)(void*)> staging{nullptr, std::free};
  std::vector<StagingCopy> copies;
  std::vector<std::uint32_t> crcs;
};

// Sources of the given sizes, destinations 4 KiB-aligned one after another in one buffer, as in the checkpointer.
Buffers make_buffers(const std::vector<std::size_t>& sizes, std::uint32_t seed) {
  Buffers b;
  std::vector<std::size_t> offsets;
  std::size_t total = 0;
  for (std::size_t n : sizes) {
    offsets.push_back(total);
    total += (n + 4095) / 4096 * 4096;
  }
  b.staging.reset(static_cast<std::uint8_t*>(std::aligned_alloc(4096, total + 4096)));
  std::memset(b.staging.get(), 0xAB, total + 4096);
  b.crcs.assign(sizes.size(), 0xDEADBEEFu);
  for (std::size_t i = 0; i < sizes.size(); ++i)
    b.src.push_back(random_bytes(sizes[i], seed + static_cast<std::uint32_t>(i)));
  for (std::size_t i = 0; i < sizes.size(); ++i)
    b.copies.push_back(StagingCopy{b.staging.get() + offsets[i], b.src[i].data(), sizes[i], &b.crcs[i]});
  return b;
}

void expect_exact(const Buffers& b, const std::string& what) {
  for (std::size_t i = 0; i < b.copies.size(); ++i) {
    const StagingCopy& c = b.copies[i];
    if (c.bytes > 0) {  // an empty source vector's data() may be null, which memcmp must not be given
      EXPECT_EQ(std::memcmp(c.dst, c.src, c.bytes), 0) << what << ": copy " << i << " (" << c.bytes << " bytes)";
    }
    EXPECT_EQ(b.crcs[i], crc32c_extend(0, c.src, c.bytes)) << what << ": copy " << i << " (" << c.bytes << " bytes)";
  }
}

TEST(CheckpointStagingPass, EveryThreadCountGivesTheSingleThreadedResult) {
  constexpr std::size_t MiB = std::size_t{1} << 20;
  // Above the pass's parallel threshold in total, with copies smaller than, equal to and spanning several pieces.
  const std::vector<std::size_t> sizes = {0, 1, 4095, 4 * MiB, 4 * MiB + 1, 9 * MiB + 17, 333, 13 * MiB};
  for (int threads : {1, 2, 3, 5}) {
    StagingPass pass(threads, crc32c_copy_kernels().front());
    EXPECT_EQ(pass.threads(), threads);
    for (int round = 0; round < 3; ++round) {  // the helpers go through several rounds
      Buffers b = make_buffers(sizes, 100 * threads + round);
      pass.run(b.copies);
      expect_exact(b, std::to_string(threads) + " threads, round " + std::to_string(round));
    }
  }
}

// CheckpointOptions::staging_kernel: whichever kernel the pass is given (every one this CPU has), on one thread and
// spread over helpers, the copies and checksums are the same.
TEST(CheckpointStagingPass, EveryKernelGivesTheSameResult) {
  constexpr std::size_t MiB = std::size_t{1} << 20;
  const std::vector<std::size_t> sizes = {0, 4095, 4 * MiB + 1, 9 * MiB + 17};
  for (const Crc32cCopyKernel& kernel : crc32c_copy_kernels()) {
    for (int threads : {1, 3}) {
      StagingPass pass(threads, kernel);
      EXPECT_STREQ(pass.kernel().name, kernel.name);
      Buffers b = make_buffers(sizes, threads);
      pass.run(b.copies);
      expect_exact(b, std::string(kernel.name) + " on " + std::to_string(threads) + " threads");
    }
  }
}

std::atomic<int> counted_copies{0};
std::uint32_t counting_copy(void* dst, const void* src, std::size_t size, std::uint32_t crc) {
  counted_copies.fetch_add(1);
  return crc32c_copy_kernels().back().copy(dst, src, size, crc);
}

// The pass calls the kernel it was given, for every piece, on every thread: none goes to crc32c_copy's own choice.
TEST(CheckpointStagingPass, EveryPieceGoesThroughTheGivenKernel) {
  constexpr std::size_t MiB = std::size_t{1} << 20;
  const Crc32cCopyKernel counting{"counting", 1, counting_copy};
  for (int threads : {1, 3}) {
    counted_copies = 0;
    StagingPass pass(threads, counting);
    Buffers b = make_buffers({1000, 9 * MiB + 17, 4 * MiB}, 11);
    pass.run(b.copies);
    expect_exact(b, "counting kernel on " + std::to_string(threads) + " threads");
    // One call per copy on one thread; in pieces of 4 MiB (1 + 3 + 1) when spread.
    EXPECT_EQ(counted_copies.load(), threads == 1 ? 3 : 5) << threads << " threads";
  }
}

TEST(CheckpointStagingPass, SmallSavesAndNoCopiesAtAll) {
  StagingPass pass(4, crc32c_copy_kernels().front());
  Buffers small = make_buffers({10, 5000, 70000}, 7);  // below the parallel threshold: done by the caller alone
  pass.run(small.copies);
  expect_exact(small, "small");
  pass.run({});
  Buffers big = make_buffers({std::size_t{24} << 20}, 8);  // one copy, six pieces
  pass.run(big.copies);
  expect_exact(big, "one large copy after an empty round");
}

TEST(CheckpointStagingPass, AutomaticThreadsShareTheCpusOfOverlappingRanks) {
  // 4 ranks unbound on a 2-CPU host: no helpers; 1 rank there: both CPUs.
  const std::vector<std::string> unbound(4, "a 11");
  EXPECT_EQ(automatic_staging_threads(unbound, 2), 1);
  EXPECT_EQ(automatic_staging_threads({"a 11"}, 0), 2);
  // Two hosts of 16 CPUs, 2 unbound ranks each: 8 threads a rank; the other host's ranks do not count.
  const std::string all16 = "a " + std::string(16, '1');
  const std::string other16 = "b " + std::string(16, '1');
  EXPECT_EQ(automatic_staging_threads({all16, all16, other16, other16}, 0), 8);
  // Bound per socket (8 CPUs each), 4 ranks a socket: 2 threads each.
  const std::string socket0 = "a " + std::string(8, '1') + std::string(8, '0');
  const std::string socket1 = "a " + std::string(8, '0') + std::string(8, '1');
  EXPECT_EQ(automatic_staging_threads({socket0, socket0, socket0, socket0, socket1, socket1, socket1, socket1}, 5), 2);
  // Each bound to 4 CPUs of its own: 4 threads each; a 64-CPU rank alone: at most 8.
  EXPECT_EQ(automatic_staging_threads({"a 1111", "a 00001111"}, 1), 4);
  EXPECT_EQ(automatic_staging_threads({"a " + std::string(64, '1')}, 0), 8);
  // This process: one rank alone gets its allowed CPUs (1..8).
  const std::string mine = cpu_placement();
  EXPECT_NE(mine.find(' '), std::string::npos) << mine;
  const int alone = automatic_staging_threads({mine}, 0);
  EXPECT_GE(alone, 1);
  EXPECT_LE(alone, 8);
}

}  // namespace
}  // namespace tenax::ckpt
