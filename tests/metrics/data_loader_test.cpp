// DataLoader: order and content independent of the number of workers, bounded prefetch, errors at the right batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "tenax/build_config.hpp"
#include "tenax/data_loader.hpp"
#include "tenax/error.hpp"

namespace tenax {
namespace {

// A pure function of the index (what determinism requires of a producer), with a per-index delay that scrambles the
// order in which workers finish.
void fill(std::int64_t index, std::span<std::byte> out) {
  std::uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(index + 1);
  for (std::byte& b : out) {
    x ^= x >> 13;
    x ^= x << 7;
    x ^= x >> 17;
    b = static_cast<std::byte>(x);
  }
  std::this_thread::sleep_for(std::chrono::microseconds((index * 7919) % 5 * 300));
}

std::vector<std::vector<std::byte>> consume(int workers, int prefetch, int count) {
  DataLoader loader({.batch_bytes = 256, .workers = workers, .prefetch = prefetch, .first_index = 3}, fill);
  std::vector<std::vector<std::byte>> seen;
  for (int i = 0; i < count; ++i) {
    const Batch b = loader.next();
    EXPECT_EQ(b.index, 3 + i);
    EXPECT_EQ(b.device, nullptr);
    seen.emplace_back(b.host.begin(), b.host.end());
  }
  return seen;
}

TEST(DataLoader, SameBatchesInTheSameOrderForAnyWorkerCount) {
  const auto one = consume(1, 1, 40);
  const auto three = consume(3, 4, 40);
  const auto eight = consume(8, 16, 40);
  EXPECT_EQ(one, three);
  EXPECT_EQ(one, eight);
  std::vector<std::byte> expected(256);
  fill(3 + 17, expected);
  EXPECT_EQ(one[17], expected);
}

TEST(DataLoader, NeverProducesMoreThanPrefetchAhead) {
  std::atomic<std::int64_t> highest{-1};
  std::atomic<std::int64_t> consumed{0};
  std::atomic<bool> violated{false};
  DataLoader loader({.batch_bytes = 8, .workers = 4, .prefetch = 3}, [&](std::int64_t index, std::span<std::byte> out) {
    // Batch `index` may start once next() has handed out index - 3 (`consumed` is set just
    // after next() returns, so it may lag by one here).
    if (index > consumed.load() + 3) violated = true;
    std::int64_t h = highest.load();
    while (index > h && !highest.compare_exchange_weak(h, index)) {
    }
    std::memset(out.data(), static_cast<int>(index), out.size());
  });
  for (int i = 0; i < 30; ++i) {
    const Batch b = loader.next();
    consumed = i + 1;
    EXPECT_EQ(static_cast<int>(b.host[0]), i % 256);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let the workers fill the ring
    EXPECT_LE(highest.load(), i + 3);
  }
  EXPECT_FALSE(violated.load());
}

TEST(DataLoader, WaitIsMeasuredForASlowProducer) {
  DataLoader loader({.batch_bytes = 8, .workers = 1, .prefetch = 1}, [](std::int64_t, std::span<std::byte>) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  for (int i = 0; i < 5; ++i)
    loader.next();
  const DataLoaderStats s = loader.stats();
  EXPECT_EQ(s.batches, 5);
  EXPECT_GE(s.wait_seconds, 5 * 0.015);
  EXPECT_GE(s.max_wait_seconds, 0.015);
  EXPECT_GE(s.last_wait_seconds, 0.015);
}

TEST(DataLoader, ProducerErrorSurfacesAtItsBatchAndLaterBatchesFollow) {
  DataLoader loader({.batch_bytes = 4, .workers = 2, .prefetch = 2}, [](std::int64_t index, std::span<std::byte> out) {
    if (index == 2) throw std::runtime_error("corrupt sample 2");
    out[0] = static_cast<std::byte>(index);
  });
  EXPECT_EQ(loader.next().index, 0);
  EXPECT_EQ(loader.next().index, 1);
  EXPECT_THROW(
      {
        try {
          loader.next();
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "corrupt sample 2");
          throw;
        }
      },
      std::runtime_error);
  const Batch b = loader.next();
  EXPECT_EQ(b.index, 3);
  EXPECT_EQ(static_cast<int>(b.host[0]), 3);
}

TEST(DataLoader, FiniteLoaderStopsAtEndIndex) {
  DataLoader loader({.batch_bytes = 4, .workers = 2, .prefetch = 8, .first_index = 5, .end_index = 8},
                    [](std::int64_t, std::span<std::byte>) {});
  for (int i = 5; i < 8; ++i)
    EXPECT_EQ(loader.next().index, i);
  EXPECT_THROW(loader.next(), UsageError);
}

TEST(DataLoader, BadOptionsAreUsageErrors) {
  auto noop = [](std::int64_t, std::span<std::byte>) {};
  EXPECT_THROW(DataLoader({.batch_bytes = 0}, noop), UsageError);
  EXPECT_THROW(DataLoader({.batch_bytes = 8, .workers = -1}, noop), UsageError);
  EXPECT_THROW(DataLoader({.batch_bytes = 8, .prefetch = -2}, noop), UsageError);
  EXPECT_THROW(DataLoader({.batch_bytes = 8, .first_index = 4, .end_index = 2}, noop), UsageError);
  EXPECT_THROW(DataLoader({.batch_bytes = 8}, DataLoader::Producer{}), UsageError);
  int dummy_stream = 0;
  EXPECT_THROW(DataLoader({.batch_bytes = 8, .stream = &dummy_stream}, noop), UsageError);
#if !TENAX_HAVE_CUDA
  EXPECT_THROW(DataLoader({.batch_bytes = 8, .pinned = true}, noop), UsageError);
#endif
}

TEST(DataLoader, DefaultsComeFromTheEnvironmentRegistry) {
  DataLoader loader({.batch_bytes = 8}, [](std::int64_t, std::span<std::byte>) {});
  EXPECT_GE(loader.options().workers, 1);
  EXPECT_GE(loader.options().prefetch, 1);
}

}  // namespace
}  // namespace tenax
