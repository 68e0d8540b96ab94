// TokenDataset: samples are the documented windows of the stream, every epoch is a permutation, fill() is a pure
// function of the positions (however they are split into calls or threads), batches follow the documented formula
// for any data-parallel layout, and damaged or truncated shards are refused with the file named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "data/sample_order.hpp"
#include "data_test_util.hpp"
#include "tenax/data_loader.hpp"
#include "tenax/error.hpp"
#include "tenax/token_dataset.hpp"

namespace tenax::test {
namespace {

using ::testing::HasSubstr;

std::vector<std::int32_t> fill(const TokenDataset& ds, std::uint64_t first, std::size_t count) {
  std::vector<std::int32_t> out(count * ds.sample_tokens());
  ds.fill(first, count, out.data());
  return out;
}

TEST(SampleOrder, EveryEpochIsAPermutation) {
  for (std::uint64_t n : {1ull, 2ull, 3ull, 4ull, 5ull, 7ull, 16ull, 17ull, 100ull, 1000ull, 4097ull, 65536ull}) {
    const data::SampleOrder order(n, 42, true);
    for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<bool> seen(n, false);
      for (std::uint64_t i = 0; i < n; ++i) {
        const std::uint64_t k = order.at(epoch * n + i);
        ASSERT_LT(k, n);
        ASSERT_FALSE(seen[k]) << "n " << n << " epoch " << epoch << ": sample " << k << " twice";
        seen[k] = true;
      }
    }
  }
}

TEST(SampleOrder, ShufflesDifferentlyPerEpochAndSeed) {
  const std::uint64_t n = 1000;
  const data::SampleOrder a(n, 1, true), b(n, 2, true);
  std::vector<std::uint64_t> e0, e1, s2;
  for (std::uint64_t i = 0; i < n; ++i) {
    e0.push_back(a.at(i));
    e1.push_back(a.at(n + i));
    s2.push_back(b.at(i));
  }
  std::vector<std::uint64_t> identity(n);
  for (std::uint64_t i = 0; i < n; ++i)
    identity[i] = i;
  EXPECT_NE(e0, identity);
  EXPECT_NE(e0, e1);
  EXPECT_NE(e0, s2);
  // Shuffled enough that neighbours are not neighbours: few consecutive pairs stay adjacent.
  int adjacent = 0;
  for (std::uint64_t i = 1; i < n; ++i)
    adjacent += (e0[i] == e0[i - 1] + 1);
  EXPECT_LT(adjacent, 20);
  const data::SampleOrder plain(n, 1, false);
  EXPECT_EQ(plain.at(5 * n + 17), 17u);
}

TEST(SampleOrder, ConstantTimeAtAnyPosition) {
  // A huge dataset at a huge position: no table, no walk from the start.
  const std::uint64_t n = (1ull << 62) + 12345;
  const data::SampleOrder order(n, 7, true);
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t x = 0;
  for (std::uint64_t p = ~0ull - 100000; p < ~0ull; ++p)
    x ^= order.at(p);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 5.0) << x;
  EXPECT_LT(order.at(~0ull), n);
}

TEST(TokenDataset, SamplesAreWindowsOfTheStream) {
  ScratchDir dir("windows");
  // 5 shards of 1000 tokens and a short sixth; appends of 333 tokens cross shard boundaries.
  const auto synth = write_synthetic(dir / "ds", 5300, 700, 65536, 1000, 333);
  ASSERT_EQ(synth.index.train.shards.size(), 6u);
  TokenDataset ds(dir / "ds", {.split = Split::Train, .seq_len = 64, .seed = 9});
  EXPECT_EQ(ds.num_samples(), (5300u - 1) / 64);
  EXPECT_EQ(ds.sample_tokens(), 65u);
  EXPECT_EQ(ds.info().tokens, 5300u);
  EXPECT_EQ(ds.info().shards, 6u);
  EXPECT_EQ(ds.info().vocab_size, 65536u);
  for (std::uint64_t p = 0; p < 3 * ds.num_samples(); p += 7) {
    const auto row = fill(ds, p, 1);
    const std::uint64_t k = ds.sample_at(p);
    for (std::size_t t = 0; t < row.size(); ++t)
      ASSERT_EQ(row[t], synth.train[k * 64 + t]) << "position " << p << " sample " << k << " token " << t;
  }
  // The validation split is a separate stream.
  TokenDataset val(dir / "ds", {.split = Split::Validation, .seq_len = 64, .shuffle = false});
  EXPECT_EQ(val.num_samples(), (700u - 1) / 64);
  const auto row = fill(val, 3, 1);
  EXPECT_EQ(std::vector<std::int32_t>(row.begin(), row.end()),
            std::vector<std::int32_t>(synth.validation.begin() + 3 * 64, synth.validation.begin() + 4 * 64 + 1));
}

TEST(TokenDataset, IsABatchSourceForItsOwnSequenceLength) {
  ScratchDir dir("batch-source");
  write_synthetic(dir / "ds", 3000, 300, 1000, 1000, 333);
  const TokenDataset ds(dir / "ds", {.split = Split::Train, .seq_len = 32, .seed = 3});
  const BatchSource& source = ds;
  std::vector<std::int32_t> through_source(5 * ds.sample_tokens());
  source.fill(11, 5, 32, through_source.data());
  EXPECT_EQ(through_source, fill(ds, 11, 5));
  try {
    source.fill(11, 5, 64, through_source.data());
    FAIL() << "a sequence length other than the dataset's was served";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("opened with seq_len 32 but is asked for samples of seq_len 64"));
  }
}

TEST(TokenDataset, EachEpochServesEverySampleOnce) {
  ScratchDir dir("epoch");
  write_synthetic(dir / "ds", 20001, 10, 1 << 20, 4096);  // 4-byte tokens
  TokenDataset ds(dir / "ds", {.split = Split::Train, .seq_len = 50, .seed = 3});
  const std::uint64_t n = ds.num_samples();
  ASSERT_EQ(n, 400u);
  for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
    const auto rows = fill(ds, epoch * n, static_cast<std::size_t>(n));
    std::set<std::int32_t> starts;
    for (std::uint64_t j = 0; j < n; ++j)
      starts.insert(rows[j * ds.sample_tokens()]);  // token value = stream position: the window's start
    ASSERT_EQ(starts.size(), n);
    EXPECT_EQ(*starts.begin(), 0);
    EXPECT_EQ(*starts.rbegin(), static_cast<std::int32_t>((n - 1) * 50));
  }
}

TEST(TokenDataset, FillIsAPureFunctionOfThePositions) {
  ScratchDir dir("pure");
  write_synthetic(dir / "ds", 30000, 10, 50000, 2500);
  const TokenDatasetOptions opt{.split = Split::Train, .seq_len = 31, .seed = 11};
  TokenDataset a(dir / "ds", opt);
  const std::uint64_t first = 12345, count = 2000;  // crosses the epoch boundary at 967 * 12
  const auto whole = fill(a, first, count);
  // Split into uneven calls.
  std::vector<std::int32_t> pieces;
  for (std::uint64_t p = first; p < first + count;) {
    const std::size_t c = static_cast<std::size_t>(std::min<std::uint64_t>(1 + (p * 7) % 97, first + count - p));
    const auto part = fill(a, p, c);
    pieces.insert(pieces.end(), part.begin(), part.end());
    p += c;
  }
  EXPECT_EQ(pieces, whole);
  // From several threads at once, into disjoint parts of one buffer.
  std::vector<std::int32_t> threaded(whole.size());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (std::uint64_t j = static_cast<std::uint64_t>(t); j < count; j += 4)
        a.fill(first + j, 1, threaded.data() + j * a.sample_tokens());
    });
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(threaded, whole);
  // Another instance of the same dataset with the same options: the same samples.
  TokenDataset b(dir / "ds", opt);
  EXPECT_EQ(fill(b, first, count), whole);
  // Another seed: other samples.
  TokenDataset c(dir / "ds", {.split = Split::Train, .seq_len = 31, .seed = 12});
  EXPECT_NE(fill(c, first, count), whole);
  const TokenDatasetCounters n = a.counters();
  EXPECT_EQ(n.samples, 3 * count);
  EXPECT_EQ(n.tokens, 3 * count * 32);
  EXPECT_EQ(n.bytes_read, 3 * count * 32 * 2);
}

TEST(TokenBatches, EachRankGetsItsSliceOfTheGlobalBatch) {
  EXPECT_EQ(token_batch_first_position(0, 8, 0, 1), 0u);
  EXPECT_EQ(token_batch_first_position(5, 8, 3, 4), 5u * 8 + 3 * 2);
  EXPECT_THROW(token_batch_first_position(0, 6, 0, 4), UsageError);                   // 6 % 4
  EXPECT_THROW(token_batch_first_position(0, 8, 4, 4), UsageError);                   // rank out of range
  EXPECT_THROW(token_batch_first_position(-1, 8, 0, 4), UsageError);                  // negative step
  EXPECT_THROW(token_batch_first_position(1ll << 62, 1ull << 40, 0, 1), UsageError);  // overflow

  ScratchDir dir("batches");
  write_synthetic(dir / "ds", 40000, 10, 65536, 7000);
  auto ds = std::make_shared<const TokenDataset>(dir / "ds", TokenDatasetOptions{.seq_len = 16, .seed = 5});
  const std::uint64_t global = 12;
  // dp = 1, 2, 3, 4, 6: the concatenation of the ranks' batches is the same global batch, for every step.
  std::vector<std::vector<std::int32_t>> reference;
  for (int dp : {1, 2, 3, 4, 6}) {
    const std::size_t bytes = token_batch_bytes(*ds, global, dp);
    ASSERT_EQ(bytes, global / dp * 17 * 4);
    std::vector<DataLoader::Producer> producers;
    for (int r = 0; r < dp; ++r)
      producers.push_back(make_token_batch_producer(ds, global, r, dp));
    for (std::int64_t step = 0; step < 40; ++step) {
      std::vector<std::int32_t> all;
      for (int r = 0; r < dp; ++r) {
        std::vector<std::int32_t> part(bytes / 4);
        producers[static_cast<std::size_t>(r)](step, std::as_writable_bytes(std::span(part)));
        all.insert(all.end(), part.begin(), part.end());
      }
      if (dp == 1) {
        reference.push_back(all);
        std::vector<std::int32_t> direct(global * 17);
        ds->fill(static_cast<std::uint64_t>(step) * global, global, direct.data());
        EXPECT_EQ(all, direct);
      } else {
        EXPECT_EQ(all, reference[static_cast<std::size_t>(step)]) << "dp " << dp << " step " << step;
      }
    }
  }
  // A slot of the wrong size is refused with the fix.
  std::vector<std::int32_t> small(10);
  try {
    make_token_batch_producer(ds, global, 0, 2)(0, std::as_writable_bytes(std::span(small)));
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("token_batch_bytes"));
  }
}

TEST(TokenBatches, ResumingADataLoaderContinuesTheSameSequence) {
  ScratchDir dir("resume");
  write_synthetic(dir / "ds", 10000, 10, 65536, 3000);
  auto ds = std::make_shared<const TokenDataset>(dir / "ds", TokenDatasetOptions{.seq_len = 8, .seed = 1});
  const std::size_t bytes = token_batch_bytes(*ds, 4, 1);
  auto run = [&](std::int64_t first, int steps, int workers) {
    DataLoader loader({.batch_bytes = bytes, .workers = workers, .prefetch = 3, .first_index = first},
                      make_token_batch_producer(ds, 4, 0, 1));
    std::vector<std::vector<std::byte>> out;
    for (int i = 0; i < steps; ++i) {
      const Batch b = loader.next();
      out.emplace_back(b.host.begin(), b.host.end());
    }
    return out;
  };
  const auto straight = run(0, 30, 1);
  const auto resumed = run(17, 13, 3);
  for (int i = 0; i < 13; ++i)
    EXPECT_EQ(resumed[static_cast<std::size_t>(i)], straight[static_cast<std::size_t>(17 + i)]) << "step " << 17 + i;
}

std::string open_error(const std::string& dir, TokenDatasetOptions options = {.seq_len = 16}) {
  try {
    TokenDataset ds(dir, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TokenDataset, DamagedShardsAreRefusedWithTheFileNamed) {
  ScratchDir dir("damage");
  const std::string ds = dir / "ds";
  write_synthetic(ds, 5000, 100, 65536, 2000);
  const std::string shard = ds + "/train-00001.tok";
  ASSERT_EQ(open_error(ds), "");

  // Truncated payload.
  const std::string good = read_file(shard);
  truncate_file(shard, good.size() - 2);
  EXPECT_THAT(open_error(ds), AllOf(HasSubstr(shard), HasSubstr("truncated"), HasSubstr("tenax-data")));
  // Truncated inside the header.
  truncate_file(shard, 20);
  EXPECT_THAT(open_error(ds), AllOf(HasSubstr(shard), HasSubstr("truncated")));
  // Header byte flipped.
  write_file(shard, good);
  flip_byte(shard, 25);
  EXPECT_THAT(open_error(ds), AllOf(HasSubstr(shard), HasSubstr("header checksum mismatch")));
  // Payload byte flipped: found when checksums are verified at open...
  write_file(shard, good);
  flip_byte(shard, 64 + 101);
  EXPECT_EQ(open_error(ds), "");
  EXPECT_THAT(open_error(ds, {.seq_len = 16, .verify_checksums = true}),
              AllOf(HasSubstr(shard), HasSubstr("payload checksum mismatch")));
  // ...and an id outside the vocabulary is refused by fill() whatever the checksums say.
  write_synthetic(dir / "small", 5000, 100, 1000, 2000);  // ids < 1000 in 2-byte slots
  const std::string small_shard = dir / "small/train-00000.tok";
  flip_byte(small_shard, 64 + 2 * 10 + 1, 0x80);  // token 10's high byte: id >= 32768
  TokenDataset opened(dir / "small", {.seq_len = 4999, .shuffle = false});
  std::vector<std::int32_t> out(5000);
  try {
    opened.fill(0, 1, out.data());
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(small_shard), HasSubstr("outside the vocabulary"), HasSubstr("token 10")));
  }
  // A shard swapped for another of the same dataset: the header's number and checksum disagree with the index.
  write_file(shard, read_file(ds + "/train-00000.tok"));
  EXPECT_THAT(open_error(ds), AllOf(HasSubstr(shard), HasSubstr("the index says")));
  // Missing shard.
  std::filesystem::remove(shard);
  EXPECT_THAT(open_error(ds), AllOf(HasSubstr(shard), HasSubstr("No such file")));
}

TEST(TokenDataset, DamagedIndexIsRefused) {
  ScratchDir dir("badindex");
  const std::string ds = dir / "ds";
  write_synthetic(ds, 5000, 100, 65536, 2000);
  flip_byte(ds + "/index.json", 40);
  EXPECT_THAT(open_error(ds), AllOf(HasSubstr(ds + "/index.json"), HasSubstr("checksum mismatch")));
  write_file(ds + "/index.json", "");
  EXPECT_THAT(open_error(ds), HasSubstr(ds + "/index.json"));
}

TEST(TokenDataset, BadOptionsAreUsageErrors) {
  ScratchDir dir("options");
  write_synthetic(dir / "ds", 100, 10, 65536, 2000);
  EXPECT_THROW(TokenDataset(dir / "ds", {.seq_len = 0}), UsageError);
  EXPECT_THROW(TokenDataset(dir / "ds", {.seq_len = 100}), UsageError);  // needs 101 tokens
  EXPECT_THAT(open_error(dir / "ds", {.split = Split::Validation, .seq_len = 10}), HasSubstr("validation"));
  TokenDataset ds(dir / "ds", {.seq_len = 99});
  EXPECT_EQ(ds.num_samples(), 1u);
  std::vector<std::int32_t> out(100);
  EXPECT_THROW(ds.fill(~0ull, 2, out.data()), UsageError);
  // A directory that is not there is a wrong path (never retried by a launcher), not a damaged dataset.
  try {
    TokenDataset missing(dir / "no-such-dataset", {.seq_len = 10});
    ADD_FAILURE() << "opened a dataset that does not exist";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no-such-dataset does not exist: give the directory tenax-data encode wrote"));
  }
}

}  // namespace
}  // namespace tenax::test
