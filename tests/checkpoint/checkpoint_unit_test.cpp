// Pure unit tests of the checkpoint internals: CRC32C, the manifest's JSON, block geometry and the write plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>

#include "checkpoint/crc32c.hpp"
#include "checkpoint/geometry.hpp"
#include "checkpoint/manifest.hpp"
#include "checkpoint/shard_plan.hpp"
#include "common/scoped_env.hpp"
#include "core/json.hpp"
#include "tenax/checkpoint.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"

namespace tenax::ckpt {
namespace {

TEST(CheckpointCrc32c, KnownVectors) {
  EXPECT_EQ(crc32c_extend(0, "123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c_extend_software(0, "123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c_extend_in_house(0, "123456789", 9), 0xE3069283u);
  std::vector<std::uint8_t> zeros(32, 0), ones(32, 0xff);
  EXPECT_EQ(crc32c_extend(0, zeros.data(), 32), 0x8A9136AAu);  // RFC 3720 B.4
  EXPECT_EQ(crc32c_extend(0, ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c_extend(0, nullptr, 0), 0u);
}

TEST(CheckpointCrc32c, FastPathsMatchTablesForEveryLengthAndAlignment) {
  std::mt19937_64 rng(42);
  std::vector<std::uint8_t> src(200000 + 64);
  // A 64-byte aligned destination: crc32c_copy takes its first kernel at offset 0, the 32-byte ones at offset 32, the
  // 8-byte one or the tables at the others.
  struct FreeDeleter {
    void operator()(std::uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<std::uint8_t, FreeDeleter> dst(static_cast<std::uint8_t*>(std::aligned_alloc(64, 200000 + 128)));
  for (auto& b : src)
    b = static_cast<std::uint8_t>(rng());
  // Around the three-stream loops' 12 KiB and the fold's 128- and 256-byte boundaries, and long ones.
  for (std::size_t len : {0ul,   1ul,   7ul,   8ul,    9ul,     127ul,   128ul,   255ul,   256ul,    257ul,
                          383ul, 384ul, 385ul, 4095ul, 12287ul, 12288ul, 12289ul, 24576ul, 100001ul, 200000ul}) {
    for (std::size_t align : {0ul, 1ul, 3ul, 8ul}) {
      const std::uint8_t* p = src.data() + align;
      const std::uint32_t want = crc32c_extend_software(0x1234, p, len);
      EXPECT_EQ(crc32c_extend(0x1234, p, len), want)
          << "len " << len << " align " << align << (crc32c_uses_isal() ? " (ISA-L)" : " (in-house)");
      EXPECT_EQ(crc32c_extend_in_house(0x1234, p, len), want) << "len " << len << " align " << align;
      // Around each copy, bytes no kernel may touch.
      auto untouched_around = [&](std::size_t offset) {
        const std::uint8_t* d = dst.get();
        for (std::size_t i = 0; i < offset; ++i)
          if (d[i] != 0xA5) return false;
        for (std::size_t i = offset + len; i < offset + len + 64; ++i)
          if (d[i] != 0xA5) return false;
        return true;
      };
      for (std::size_t dst_offset : {0ul, 32ul, align ^ 1, 8ul}) {
        std::memset(dst.get(), 0xA5, 200000 + 128);
        EXPECT_EQ(crc32c_copy(dst.get() + dst_offset, p, len, 0x1234), want)
            << "len " << len << " destination offset " << dst_offset;
        EXPECT_EQ(std::memcmp(dst.get() + dst_offset, p, len), 0) << "copy of len " << len;
        EXPECT_TRUE(untouched_around(dst_offset)) << "len " << len << " destination offset " << dst_offset;
      }
      // Every kernel this CPU has, not only those crc32c_copy prefers here; a destination a kernel's stores cannot
      // take (offset 1) is passed on, not faulted on.
      for (const Crc32cCopyKernel& kernel : crc32c_copy_kernels()) {
        for (std::size_t dst_offset : {0ul, 1ul}) {
          std::memset(dst.get(), 0xA5, 200000 + 128);
          EXPECT_EQ(kernel.copy(dst.get() + dst_offset, p, len, 0x1234), want)
              << kernel.name << " len " << len << " destination offset " << dst_offset;
          EXPECT_EQ(std::memcmp(dst.get() + dst_offset, p, len), 0) << kernel.name << " copy of len " << len;
          EXPECT_TRUE(untouched_around(dst_offset)) << kernel.name << " len " << len << " offset " << dst_offset;
        }
      }
    }
  }
  // Which kernels this host ran: a CPU without one of them tests it nowhere (the CI machines have AVX2 and
  // VPCLMULQDQ; AVX-512 only some).
  std::string tested;
  for (const Crc32cCopyKernel& kernel : crc32c_copy_kernels())
    tested += std::string(tested.empty() ? "" : ", ") + kernel.name;
  RecordProperty("copy_kernels", tested);
  std::printf("copy + CRC32C kernels tested on this CPU: %s\n", tested.c_str());
  // Extending piecewise equals one pass.
  std::uint32_t c = 0;
  for (std::size_t at = 0; at < 100000; at += 7777)
    c = crc32c_extend(c, src.data() + at, std::min<std::size_t>(7777, 100000 - at));
  EXPECT_EQ(c, crc32c_extend(0, src.data(), 100000));
}

// The folding kernel runs only where VPCLMULQDQ exists; its constants and its reduction are checked on every host
// through the portable reference, which shares them.
TEST(CheckpointCrc32c, TheFoldsArithmeticMatchesTheTablesOnEveryHost) {
  std::mt19937_64 rng(7);
  std::vector<std::uint8_t> src(70000);
  for (auto& b : src)
    b = static_cast<std::uint8_t>(rng());
  // Below and around the fold's 256-byte start, each whole number of 128-byte blocks with and without a tail, long.
  std::vector<std::size_t> lengths;
  for (std::size_t len = 0; len <= 1100; ++len)
    lengths.push_back(len);
  for (std::size_t len : {4095ul, 4096ul, 65536ul + 77, 70000ul})
    lengths.push_back(len);
  for (std::size_t len : lengths)
    for (std::uint32_t crc : {0u, 0x1234u, 0xFFFFFFFFu}) {
      const std::uint8_t* p = src.data() + len % 5;
      const std::size_t n = std::min(len, src.size() - len % 5);
      ASSERT_EQ(crc32c_fold_reference(crc, p, n), crc32c_extend_software(crc, p, n)) << "len " << n << " crc " << crc;
    }
}

TEST(CheckpointCrc32c, CopyKernelsAreListedInOrderOfPreferenceAndTheTablesTakeAnyDestination) {
  const auto kernels = crc32c_copy_kernels();
  ASSERT_FALSE(kernels.empty());
  EXPECT_STREQ(kernels.back().name, "tables");
  EXPECT_EQ(kernels.back().destination_alignment, 1u);
  alignas(64) static std::uint8_t buffer[128];
  EXPECT_STREQ(crc32c_copy_kernel(buffer), kernels.front().name);
  for (const Crc32cCopyKernel& kernel : kernels) {
    ASSERT_NE(kernel.destination_alignment, 0u) << kernel.name;
    EXPECT_EQ(64 % kernel.destination_alignment, 0u) << kernel.name;
  }
  // A destination at an odd address goes to the first kernel that takes any alignment.
  const char* any = nullptr;
  for (const Crc32cCopyKernel& kernel : kernels)
    if (kernel.destination_alignment == 1 && any == nullptr) any = kernel.name;
  EXPECT_STREQ(crc32c_copy_kernel(buffer + 1), any);
}

// TENAX_CKPT_STAGING_KERNEL is checked at start-up against the names of every kernel tenax has: each this CPU has must
// be one of them, so that none can be named in code and refused in the environment; another name is refused.
TEST(CheckpointCrc32c, EveryKernelCanBeNamedInTheEnvironment) {
  const auto& vars = env::registry();
  const auto var =
      std::find_if(vars.begin(), vars.end(), [](const env::Var& v) { return v.name == "TENAX_CKPT_STAGING_KERNEL"; });
  ASSERT_NE(var, vars.end());
  EXPECT_EQ(var->default_value, "auto");
  EXPECT_NE(crc32c_find_copy_kernel(var->default_value), nullptr);
  // The variable's values are exactly "auto" and every kernel tenax has on any CPU, in order of preference; that list
  // holds each kernel this CPU has, and each is found by its name.
  std::vector<std::string_view> every{"auto"};
  for (const char* name : crc32c_every_copy_kernel_name())
    every.push_back(name);
  EXPECT_EQ(var->choices, every);
  for (const Crc32cCopyKernel& kernel : crc32c_copy_kernels()) {
    EXPECT_NE(std::find(every.begin(), every.end(), kernel.name), every.end()) << kernel.name;
    EXPECT_EQ(crc32c_find_copy_kernel(kernel.name), &kernel);
  }
  EXPECT_EQ(crc32c_find_copy_kernel("tables "), nullptr);
  for (std::string_view value : every) {
    const test::ScopedEnv set("TENAX_CKPT_STAGING_KERNEL", std::string(value).c_str());
    EXPECT_NO_THROW(env::validate()) << value;
  }
  const test::ScopedEnv set("TENAX_CKPT_STAGING_KERNEL", "crc32-3x-nt128");
  try {
    env::validate();
    ADD_FAILURE() << "TENAX_CKPT_STAGING_KERNEL=crc32-3x-nt128 accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("TENAX_CKPT_STAGING_KERNEL='crc32-3x-nt128' is not valid"), std::string::npos)
        << e.what();
  }
}

TEST(CheckpointOptionsFromEnv, TheTuningIsReadOnceForEveryCaller) {
  const test::ScopedEnv dir("TENAX_CHECKPOINT_DIR", "/ckpt"), keep("TENAX_CKPT_KEEP", "5"),
      nice("TENAX_CKPT_IO_NICE", "7"), direct("TENAX_CKPT_DIRECT_IO", "0"), threads("TENAX_CKPT_STAGING_THREADS", "3"),
      kernel("TENAX_CKPT_STAGING_KERNEL", "tables"), local("TENAX_CKPT_LOCAL_DIR", "/dev/shm/x"),
      local_keep("TENAX_CKPT_LOCAL_KEEP", "4");
  const CheckpointOptions tuning = CheckpointOptions::tuning_from_env();
  EXPECT_EQ(tuning.dir, "");
  EXPECT_EQ(tuning.keep, 5);
  EXPECT_EQ(tuning.io_nice, 7);
  EXPECT_FALSE(tuning.direct_io);
  EXPECT_EQ(tuning.staging_threads, 3);
  EXPECT_EQ(tuning.staging_kernel, "tables");
  EXPECT_EQ(tuning.local_dir, "/dev/shm/x");
  EXPECT_EQ(tuning.local_keep, 4);
  const CheckpointOptions all = CheckpointOptions::from_env(ParallelLayout{2, 1, 1});
  EXPECT_EQ(all.dir, "/ckpt");
  EXPECT_EQ(all.layout.tp, 2);
  EXPECT_EQ(std::tie(all.keep, all.io_nice, all.direct_io, all.staging_threads, all.staging_kernel, all.local_dir,
                     all.local_keep),
            std::tie(tuning.keep, tuning.io_nice, tuning.direct_io, tuning.staging_threads, tuning.staging_kernel,
                     tuning.local_dir, tuning.local_keep));
  {
    const test::ScopedEnv none("TENAX_CKPT_LOCAL_DIR", "none");
    EXPECT_EQ(CheckpointOptions::tuning_from_env().local_dir, "") << "none: no node-local tier";
  }
  const test::ScopedEnv unset("TENAX_CHECKPOINT_DIR", nullptr);
  EXPECT_NO_THROW(CheckpointOptions::tuning_from_env());
  EXPECT_THROW(CheckpointOptions::from_env(), UsageError);
}

TEST(CheckpointJson, ParsesWhatTheManifestWrites) {
  Manifest m;
  m.step = 123456789012ull;
  m.layout = ParallelLayout{2, 1, 3};
  m.world_size = 6;
  m.files = {{0, "rank_00000.h5", 4096}, {1, "rank_00001.h5", 1ull << 40}};
  m.tensors = {{"a/b.c",
                DType::BF16,
                {4, 6},
                {{0, "/tensors/a/b.c", Box{{0, 0}, {2, 6}}, 24, 0xffffffffu},
                 {1, "/tensors/a/b.c@1", Box{{2, 0}, {2, 6}}, 24, 7}}}};
  m.blobs = {{1, "rng\"state\"", 16, 99}};
  m.vds = FileDigest{"checkpoint.h5", 5000, 0x12345678u};
  Manifest back = Manifest::from_json(m.to_json());
  EXPECT_EQ(back.step, m.step);
  EXPECT_EQ(back.layout, m.layout);
  EXPECT_EQ(back.world_size, 6);
  ASSERT_EQ(back.files.size(), 2u);
  EXPECT_EQ(back.files[1].bytes, 1ull << 40);
  ASSERT_NE(back.find("a/b.c"), nullptr);
  EXPECT_EQ(back.find("a/b.c")->dtype, DType::BF16);
  EXPECT_EQ(back.find("a/b.c")->blocks[0].crc32c, 0xffffffffu);
  EXPECT_EQ(back.find("a/b.c")->blocks[1].box.offset, (Dims{2, 0}));
  EXPECT_EQ(back.find("a/b.c")->blocks[1].dataset, "/tensors/a/b.c@1");
  EXPECT_EQ(back.blobs[0].name, "rng\"state\"");
  ASSERT_TRUE(back.vds);
  EXPECT_EQ(back.vds->bytes, 5000u);
  EXPECT_EQ(back.vds->crc32c, 0x12345678u);
}

TEST(CheckpointJson, ReadsVersion1AndRefusesUnknownVersions) {
  // A version 1 manifest has no "dataset": each block is /tensors/<name> in its rank's file.
  const std::string v1 = R"({"format": "tenax-checkpoint", "version": 1, "step": 5, "world_size": 2,
    "layout": {"tp": 1, "pp": 1, "dp": 2},
    "files": [{"rank": 0, "name": "rank_00000.h5", "bytes": 10}, {"rank": 1, "name": "rank_00001.h5", "bytes": 10}],
    "tensors": [{"name": "w", "dtype": "f32", "global_shape": [4], "blocks": [
      {"rank": 0, "offset": [0], "shape": [2], "bytes": 8, "crc32c": 1},
      {"rank": 1, "offset": [2], "shape": [2], "bytes": 8, "crc32c": 2}]}],
    "blobs": []})";
  Manifest m = Manifest::from_json(v1);
  ASSERT_NE(m.find("w"), nullptr);
  EXPECT_EQ(m.find("w")->blocks[1].dataset, "/tensors/w");
  std::string v4 = v1;
  v4.replace(v4.find("\"version\": 1"), 12, "\"version\": 4");
  try {
    Manifest::from_json(v4);
    ADD_FAILURE() << "version 4 accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("format version 4 is not supported"), std::string::npos) << e.what();
  }
  // A version 2 block must name one of its own tensor's datasets.
  Manifest two;
  two.world_size = 1;
  two.tensors = {{"w", DType::F32, {2}, {{0, "/tensors/other", Box{{0}, {2}}, 8, 0}}}};
  EXPECT_THROW(Manifest::from_json(two.to_json()), std::runtime_error);
}

TEST(CheckpointJson, RejectsDamage) {
  Manifest m;
  m.world_size = 1;
  std::string text = m.to_json();
  EXPECT_THROW(Manifest::from_json(text.substr(0, text.size() / 2)), std::runtime_error);
  EXPECT_THROW(Manifest::from_json("{\"format\": \"other\"}"), std::runtime_error);
  EXPECT_THROW(json::Value::parse("[1, 2"), std::runtime_error);
  EXPECT_THROW(json::Value::parse("{\"a\": -1}").at("a").u64(), std::runtime_error);
}

TEST(CheckpointGeometry, IntersectAndRuns) {
  auto i = intersect(Box{{0, 4}, {4, 4}}, Box{{2, 0}, {4, 6}});
  ASSERT_TRUE(i);
  EXPECT_EQ(i->offset, (Dims{2, 4}));
  EXPECT_EQ(i->shape, (Dims{2, 2}));
  EXPECT_FALSE(intersect(Box{{0}, {4}}, Box{{4}, {4}}));

  // Copy the [1:3, 2:5] box of a 4x6 array into a 3x4 array at [0, 1]; compare with an element-wise copy.
  std::vector<int> src(24), dst(12, -1), want(12, -1);
  for (int k = 0; k < 24; ++k)
    src[k] = k;
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c)
      want[(0 + r) * 4 + 1 + c] = src[(1 + r) * 6 + 2 + c];
  for_each_run({2, 3}, {4, 6}, {1, 2}, {3, 4}, {0, 1}, sizeof(int),
               [&](std::uint64_t s, std::uint64_t d, std::uint64_t n) {
                 std::memcpy(reinterpret_cast<char*>(dst.data()) + d, reinterpret_cast<const char*>(src.data()) + s, n);
               });
  EXPECT_EQ(dst, want);
  // Whole rows merge into one run.
  int runs = 0;
  for_each_run({2, 6}, {4, 6}, {1, 0}, {2, 6}, {0, 0}, 4, [&](std::uint64_t, std::uint64_t, std::uint64_t n) {
    ++runs;
    EXPECT_EQ(n, 48u);
  });
  EXPECT_EQ(runs, 1);
}

std::string describe(std::vector<TensorShard> shards) {
  static std::vector<float> buffer(1024);
  for (auto& s : shards)
    s.data = buffer.data();
  normalize_shards(shards);
  return describe_shards(shards);
}

TEST(CheckpointPlan, ReplicasAreWrittenOnceSpreadOverTheirHolders) {
  auto rank = [](std::uint64_t row) {
    return describe({TensorShard::block("w", DType::F32, {4, 2}, {row, 0}, {2, 2}, nullptr),
                     TensorShard::whole("b", DType::F32, {2}, nullptr)});
  };
  Plan plan = make_plan({rank(0), rank(2), rank(0), rank(2)});  // tp=2 x dp=2
  ASSERT_EQ(plan.tensors.size(), 2u);
  EXPECT_EQ(plan.tensors[0].name, "b");
  ASSERT_EQ(plan.tensors[0].blocks.size(), 1u);
  ASSERT_EQ(plan.tensors[1].blocks.size(), 2u);
  // The two 16-byte blocks of w go to their lowest holders (0 and 1); the 8-byte b to the least loaded holder (2).
  EXPECT_EQ(plan.blocks[plan.tensors[1].blocks[0]].writer, 0);
  EXPECT_EQ(plan.blocks[plan.tensors[1].blocks[1]].writer, 1);
  EXPECT_EQ(plan.blocks[plan.tensors[0].blocks[0]].writer, 2);

  // Four data-parallel replicas of a model of eight equal tensors: each writes two, not rank 0 all eight.
  std::vector<TensorShard> model;
  for (int t = 0; t < 8; ++t)
    model.push_back(TensorShard::whole("t" + std::to_string(t), DType::F32, {16}, nullptr));
  const std::string replica = describe(model);
  Plan spread = make_plan({replica, replica, replica, replica});
  std::vector<int> written(4, 0);
  for (const auto& block : spread.blocks)
    ++written[block.writer];
  EXPECT_EQ(written, (std::vector<int>{2, 2, 2, 2}));
}

void expect_usage_error(const std::vector<std::string>& ranks, const std::string& needle) {
  try {
    make_plan(ranks);
    ADD_FAILURE() << "no error; expected one mentioning " << needle;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(CheckpointPlan, SeveralBlocksOfATensorOnOneRankGetTheirOwnDatasets) {
  // Rank 0 holds rows 0-1 and the start of row 2 of m [4, 3]; rank 1 the rest of row 2 and row 3 (ZeRO-1 boxes).
  auto r0 = describe({TensorShard::block("m", DType::F32, {4, 3}, {0, 0}, {2, 3}, nullptr),
                      TensorShard::block("m", DType::F32, {4, 3}, {2, 0}, {1, 1}, nullptr)});
  auto r1 = describe({TensorShard::block("m", DType::F32, {4, 3}, {2, 1}, {1, 2}, nullptr),
                      TensorShard::block("m", DType::F32, {4, 3}, {3, 0}, {1, 3}, nullptr),
                      TensorShard::whole("b", DType::F32, {2}, nullptr)});
  Plan plan = make_plan({r0, r1});
  ASSERT_EQ(plan.tensors.size(), 2u);
  ASSERT_EQ(plan.tensors[1].name, "m");
  std::vector<std::pair<int, std::string>> got;
  for (int b : plan.tensors[1].blocks)
    got.emplace_back(plan.blocks[b].writer, plan.blocks[b].dataset);
  EXPECT_EQ(got, (std::vector<std::pair<int, std::string>>{
                     {0, "/tensors/m@0"}, {0, "/tensors/m@1"}, {1, "/tensors/m@0"}, {1, "/tensors/m@1"}}));
  EXPECT_EQ(plan.blocks[plan.tensors[0].blocks[0]].dataset, "/tensors/b");
  // Two of one rank's blocks overlapping is refused like any overlap.
  expect_usage_error({describe({TensorShard::block("m", DType::F32, {4, 3}, {0, 0}, {2, 3}, nullptr),
                                TensorShard::block("m", DType::F32, {4, 3}, {1, 0}, {3, 3}, nullptr)})},
                     "overlaps");
}

TEST(CheckpointPlan, RefusesInconsistentShardLists) {
  auto flat = [](std::uint64_t total, std::uint64_t begin, std::uint64_t count) {
    return describe({TensorShard::flat_range("m", DType::F32, total, begin, count, nullptr)});
  };
  expect_usage_error({flat(10, 0, 6), flat(10, 5, 5)}, "overlaps");
  // Descriptions that do not parse (missing, extra or non-numeric fields) are refused, never half-read.
  expect_usage_error({"w f32 1 4 0\n"}, "malformed shard description from rank 0");
  expect_usage_error({flat(10, 0, 10), "w f32 1 4 0 4 7\n"}, "malformed shard description from rank 1");
  expect_usage_error({"w f32 1 4 x 4\n"}, "malformed");
  expect_usage_error({"w f99 1 4 0 4\n"}, "unknown dtype 'f99'");
  expect_usage_error({flat(10, 0, 4), flat(10, 5, 5)}, "cover 9 of its 10");
  expect_usage_error({flat(10, 0, 5), flat(12, 5, 5)}, "every rank must describe the same global tensor");
  expect_usage_error({describe({TensorShard::whole("a", DType::F32, {2}, nullptr),
                                TensorShard::whole("a/b", DType::F32, {2}, nullptr)})},
                     "also a group");
}

TEST(CheckpointPlan, RefusesBadShards) {
  float x[4];
  auto bad = [&](TensorShard s, const std::string& needle) {
    s.data = x;
    std::vector<TensorShard> v{s};
    try {
      normalize_shards(v);
      ADD_FAILURE() << "accepted; expected " << needle;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  bad(TensorShard::whole("", DType::F32, {2}, nullptr), "is empty");
  bad(TensorShard::whole("a//b", DType::F32, {2}, nullptr), "empty component");
  bad(TensorShard::whole("a b", DType::F32, {2}, nullptr), "contains ' '");
  bad(TensorShard::block("w", DType::F32, {4}, {3}, {2}, nullptr), "reaches beyond");
  bad(TensorShard::whole("w", DType::F32, {}, nullptr), "empty global shape");
  // Offsets near 2^64 must not wrap around the bounds check, nor shapes the byte count.
  bad(TensorShard::block("w", DType::F32, {4}, {~0ull - 1}, {3}, nullptr), "reaches beyond");
  bad(TensorShard::block("w", DType::F32, {1ull << 40, 1ull << 40}, {0, 0}, {1, 1}, nullptr), "64 bits");
  std::vector<TensorShard> twice{TensorShard::whole("w", DType::F32, {2}, x),
                                 TensorShard::whole("w", DType::F32, {2}, x)};
  try {
    normalize_shards(twice);
    ADD_FAILURE() << "the same block twice was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("is given twice on this rank"), std::string::npos) << e.what();
  }
}

TEST(CheckpointGeometry, VolumeRefusesOverflow) {
  EXPECT_EQ(volume({1ull << 31, 1ull << 32}), 1ull << 63);
  EXPECT_THROW(volume({1ull << 32, 1ull << 32}), std::overflow_error);
  EXPECT_THROW(byte_size({1ull << 62}, 4), std::overflow_error);
  EXPECT_FALSE(inside(Box{{~0ull}, {2}}, {8}));
  EXPECT_TRUE(inside(Box{{6}, {2}}, {8}));
}

TEST(CheckpointGeometry, TilingFindsOverlapsGapsAndStrays) {
  const Box a{{0, 0}, {2, 4}}, b{{2, 0}, {2, 2}}, c{{2, 2}, {2, 2}}, d{{1, 3}, {2, 1}}, far{{3, 3}, {2, 1}};
  EXPECT_FALSE(check_tiling({4, 4}, {&a, &b, &c}));
  auto gap = check_tiling({4, 4}, {&a, &b});
  ASSERT_TRUE(gap);
  EXPECT_EQ(gap->kind, TilingProblem::Uncovered);
  EXPECT_EQ(gap->covered, 12u);
  auto overlap = check_tiling({4, 4}, {&a, &b, &c, &d});
  ASSERT_TRUE(overlap);
  EXPECT_EQ(overlap->kind, TilingProblem::Overlap);
  EXPECT_EQ(overlap->first, 0u);
  EXPECT_EQ(overlap->second, 3u);
  auto stray = check_tiling({4, 4}, {&a, &far});
  ASSERT_TRUE(stray);
  EXPECT_EQ(stray->kind, TilingProblem::OutOfBounds);
  EXPECT_EQ(stray->first, 1u);
  // Two copies of one block cover the tensor's volume twice over half of it: an overlap, never "covered".
  const Box half{{0, 0}, {2, 4}};
  auto twice = check_tiling({4, 4}, {&half, &half});
  ASSERT_TRUE(twice);
  EXPECT_EQ(twice->kind, TilingProblem::Overlap);
}

// A valid two-rank manifest of one tensor split in two and one blob per rank; tests damage copies of it.
Manifest two_rank_manifest() {
  Manifest m;
  m.step = 7;
  m.world_size = 2;
  m.layout = ParallelLayout{2, 1, 1};
  m.files = {{0, "rank_00000.h5", 4096}, {1, "rank_00001.h5", 4096}};
  m.tensors = {{"w",
                DType::F32,
                {4, 2},
                {{0, "/tensors/w", Box{{0, 0}, {2, 2}}, 16, 11}, {1, "/tensors/w", Box{{2, 0}, {2, 2}}, 16, 22}}}};
  m.blobs = {{0, "progress", 8, 1}, {1, "progress", 8, 2}};
  m.vds = FileDigest{"checkpoint.h5", 2048, 3};
  return m;
}

void expect_damaged(const std::string& text, const std::string& needle) {
  try {
    Manifest::from_json(text);
    ADD_FAILURE() << "accepted; expected an error mentioning '" << needle << "' for:\n" << text;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

template <class Damage>
void expect_damaged(Damage damage, const std::string& needle) {
  Manifest m = two_rank_manifest();
  damage(m);
  expect_damaged(m.to_json(), needle);  // to_json() checksums whatever it is given: only validation can refuse it
}

TEST(CheckpointManifest, ChecksumCatchesAnyEditedByte) {
  const std::string text = two_rank_manifest().to_json();
  EXPECT_NO_THROW(Manifest::from_json(text));
  // Swap the two blocks' offsets: valid JSON, valid tiling, every block CRC intact.
  std::string swapped = text;
  const std::size_t first = swapped.find("\"offset\": [0,0]"), second = swapped.find("\"offset\": [2,0]");
  ASSERT_NE(first, std::string::npos);
  ASSERT_NE(second, std::string::npos);
  swapped.replace(second, 15, "\"offset\": [0,0]");
  swapped.replace(first, 15, "\"offset\": [2,0]");
  expect_damaged(swapped, "checksum mismatch");
  // One digit of a global shape.
  std::string digit = text;
  digit.replace(digit.find("[4,2]"), 5, "[5,2]");
  expect_damaged(digit, "checksum mismatch");
  // The checksum member must close the object.
  std::string moved = text;
  moved.replace(moved.rfind("\n}"), 2, ",\n  \"extra\": 1\n}");
  expect_damaged(moved, "is not the last member");
  // A version 3 manifest without its checksum.
  std::string stripped = text.substr(0, text.rfind(",\n  \"manifest_crc32c\"")) + "\n}\n";
  expect_damaged(stripped, "a version 3 manifest is checksummed");
}

TEST(CheckpointManifest, RefusesWhatNoWriterProduces) {
  expect_damaged([](Manifest& m) { m.files[1].name = "../../etc/passwd"; }, "not 'rank_00001.h5'");
  expect_damaged([](Manifest& m) { m.files[1].name = "rank_00000.h5"; }, "not 'rank_00001.h5'");
  expect_damaged([](Manifest& m) { m.files[1].rank = 2; }, "not a rank of the saved world of 2");
  expect_damaged([](Manifest& m) { m.files.push_back(m.files[0]); }, "listed twice");
  expect_damaged([](Manifest& m) { m.tensors[0].blocks[1].rank = 5; }, "not a rank of the saved world");
  expect_damaged([](Manifest& m) { m.files.pop_back(); }, "which is not listed");
  expect_damaged([](Manifest& m) { m.blobs[1].rank = 9; }, "not a rank of the saved world");
  expect_damaged([](Manifest& m) { m.blobs[1].rank = 0; }, "listed twice");
  expect_damaged([](Manifest& m) { m.blobs[0].name = "a/b"; }, "contains '/'");
  expect_damaged([](Manifest& m) { m.tensors[0].name = "../w"; }, "'.' or '..' component");
  expect_damaged([](Manifest& m) { m.tensors.push_back(m.tensors[0]); }, "listed twice");
  expect_damaged([](Manifest& m) { m.tensors[0].blocks[1].dataset = "/tensors/v"; }, "not one of that tensor's");
  expect_damaged([](Manifest& m) { m.tensors[0].blocks[1].dataset = "/tensors/w@x"; }, "not one of that tensor's");
  // Geometry: overlapping blocks (the old loader double-counted them, hiding a gap), gaps, strays, sizes.
  expect_damaged([](Manifest& m) { m.tensors[0].blocks[1].box.offset = {1, 0}; }, "overlap");
  expect_damaged([](Manifest& m) { m.tensors[0].global_shape = {5, 2}; }, "cover 8 of its 10");
  expect_damaged([](Manifest& m) { m.tensors[0].global_shape = {3, 2}; }, "is not inside");
  expect_damaged([](Manifest& m) { m.tensors[0].blocks[1].box.offset = {~0ull, 0}; }, "is not inside");
  expect_damaged([](Manifest& m) { m.tensors[0].blocks[0].bytes = 15; }, "records 15 bytes");
  expect_damaged([](Manifest& m) { m.tensors[0].global_shape = {1ull << 40, 1ull << 40}; }, "64 bits");
  expect_damaged([](Manifest& m) { m.tensors[0].global_shape = {0, 2}; }, "zero dimension");
  expect_damaged([](Manifest& m) { m.vds->name = "../x.h5"; }, "not 'checkpoint.h5'");
}

}  // namespace
}  // namespace tenax::ckpt
