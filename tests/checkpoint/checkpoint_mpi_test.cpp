// Checkpoints under real mpirun ranks with real HDF5 files: bitwise round trips, resharding across layouts and world
// sizes, replicated blocks written once, the VDS file read by h5dump and h5py, retention, progress, emergency save,
// blobs, and errors surfaced at the next call.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "checkpoint/commit.hpp"
#include "checkpoint/crc32c.hpp"
#include "checkpoint/manifest.hpp"
#include "common/mpi_test.hpp"
#include "common/scoped_env.hpp"
#include "core/file_system.hpp"
#include "tenax/build_config.hpp"
#include "test_dirs.hpp"
#include "test_model.hpp"
#include "thread_stats.hpp"

namespace tenax::test {
namespace {

CheckpointOptions options_for(const std::string& dir, const ParallelLayout& layout, int keep = 3) {
  CheckpointOptions o;
  o.dir = dir;
  o.keep = keep;
  o.layout = layout;
  return o;
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

std::vector<ParallelLayout> layouts_of(int world) {
  std::vector<ParallelLayout> out;
  for (int tp = 1; tp <= world; tp *= 2)
    for (int pp = 1; tp * pp <= world; pp *= 2)
      if (world % (tp * pp) == 0) out.push_back(ParallelLayout{tp, pp, world / (tp * pp)});
  return out;
}

std::string run_command(const std::string& command, int* status = nullptr) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    out.append(buf, n);
  int rc = ::pclose(p);
  if (status) *status = rc;
  return out;
}

TEST(CheckpointMpi, RoundTripAndReshardingMatrix) {
  Communicator& world = tenax::test::world();
  if (world.size() != 4) GTEST_SKIP() << "the resharding matrix runs with 4 ranks (saves on 4, loads on 4, 2 and 1)";
  std::unique_ptr<Communicator> two = world.split(world.rank() < 2 ? 0 : -1, world.rank(), "ckpt2");
  std::unique_ptr<Communicator> one = world.split(world.rank() < 1 ? 0 : -1, world.rank(), "ckpt1");
  std::vector<ParallelLayout> load_layouts = layouts_of(4);
  for (int w : {2, 1})
    for (const auto& l : layouts_of(w))
      load_layouts.push_back(l);

  int pairs = 0;
  for (const ParallelLayout& saved : layouts_of(4)) {
    SharedTempDir dir(world, "matrix");
    const std::uint64_t seed = 100 + saved.tp * 16 + saved.pp * 4 + saved.dp;
    {
      TestModel model = make_model(saved, world.rank());
      fill(model, seed);
      Checkpointer ckpt(world, options_for(dir.path(), saved), model.shards);
      Blobs blobs;
      put_value(blobs, "rank", world.rank());
      ckpt.save(7, blobs);
      ckpt.wait();
      EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(7));
    }
    for (const ParallelLayout& target : load_layouts) {
      const int n = target.world_size();
      Communicator* comm = n == 4 ? &world : n == 2 ? two.get() : one.get();
      if (comm) {
        TestModel model = make_model(target, comm->rank());
        scramble(model);
        Checkpointer ckpt(*comm, options_for(dir.path(), target), model.shards);
        LoadResult r = ckpt.load();
        EXPECT_TRUE(r.loaded);
        EXPECT_EQ(r.step, 7u);
        EXPECT_EQ(r.saved_layout, saved);
        EXPECT_EQ(r.saved_world_size, 4);
        EXPECT_EQ(get_value<int>(r.blobs, "rank"), comm->rank());
        std::string first;
        EXPECT_EQ(mismatches(model, seed, &first), 0u)
            << "saved " << saved.to_string() << " loaded as " << target.to_string() << ": first wrong " << first;
      }
      world.barrier();
      ++pairs;
    }
  }
  EXPECT_EQ(pairs, 6 * 10);
}

TEST(CheckpointMpi, ReplicatedBlocksAreWrittenOnceSpreadOverTheirHolders) {
  Communicator& world = tenax::test::world();
  if (world.size() != 4) GTEST_SKIP() << "needs tp=2 x dp=2 on 4 ranks";
  const ParallelLayout layout{2, 1, 2};
  SharedTempDir dir(world, "replicas");
  TestModel model = make_model(layout, world.rank());
  fill(model, 5);
  Checkpointer ckpt(world, options_for(dir.path(), layout), model.shards);
  ckpt.save(1);
  ckpt.wait();
  auto m = ckpt::Manifest::from_json(fs::read_file(dir / "step_1/manifest.json"));
  ASSERT_NE(m.find("layers.0.bias"), nullptr);
  EXPECT_EQ(m.find("layers.0.bias")->blocks.size(), 1u);  // held by all 4 ranks, written once
  EXPECT_EQ(m.find("embed")->blocks.size(), 2u);          // one per tp rank, replicated over dp
  EXPECT_EQ(m.find("optim/exp_avg")->blocks.size(), 2u);  // one per dp rank, replicated over tp

  // Every block is written by a rank that holds it, and every rank writes a share: no replica writes everything.
  std::vector<TestModel> held;
  for (int r = 0; r < 4; ++r)
    held.push_back(make_model(layout, r));
  std::vector<std::uint64_t> written(4, 0);
  std::uint64_t total = 0;
  for (const auto& t : m.tensors)
    for (const auto& b : t.blocks) {
      bool holder = false;
      for (const TensorShard& s : held[b.rank].shards) {
        const ckpt::Dims offset = s.offset.empty() ? ckpt::Dims(s.global_shape.size(), 0) : s.offset;
        const ckpt::Dims shape = s.shape.empty() ? s.global_shape : s.shape;
        holder = holder || (s.name == t.name && offset == b.box.offset && shape == b.box.shape);
      }
      EXPECT_TRUE(holder) << t.name << " block at " << ckpt::dims_string(b.box.offset) << " written by rank " << b.rank
                          << ", which does not hold it";
      written[b.rank] += b.bytes;
      total += b.bytes;
    }
  std::uint64_t model_bytes = 0;
  for (const auto& t : m.tensors) {
    std::uint64_t n = 1;
    for (auto d : t.global_shape)
      n *= d;
    model_bytes += n * dtype_size(t.dtype);
  }
  EXPECT_EQ(total, model_bytes) << "each element written exactly once";
  for (int r = 0; r < 4; ++r) {
    if (world.rank() == 0)
      std::printf("rank %d writes %llu of %llu bytes\n", r, (unsigned long long)written[r], (unsigned long long)total);
    EXPECT_GT(written[r], total / 8) << "rank " << r << " writes too small a share";
  }
  EXPECT_GE(ckpt.staged_bytes(), written[world.rank()]) << "a rank stages what it writes";

  // The 2-d ZeRO tensor: dp rank 0 holds rows 0-5 and the start of row 6, dp rank 1 the rest. A file that holds two
  // blocks of it names them master@0 and master@1.
  if (world.rank() == 0) {
    std::map<int, int> per_file;
    for (const auto& b : m.find("optim/master")->blocks)
      ++per_file[b.rank];
    for (const auto& b : m.find("optim/master")->blocks) {
      int status = 0;
      const std::string out =
          run_command("/usr/bin/h5ls -r " + dir / ("step_1/" + ckpt::rank_file_name(b.rank)) + " 2>&1", &status);
      EXPECT_EQ(status, 0) << out;
      const std::string shape = "{" + std::to_string(b.box.shape[0]) + ", " + std::to_string(b.box.shape[1]) + "}";
      EXPECT_TRUE(has(out, b.dataset + "  Dataset " + shape)) << out;
      EXPECT_EQ(b.dataset.find('@') != std::string::npos, per_file[b.rank] > 1) << b.dataset;
    }
  }
}

TEST(CheckpointMpi, VirtualDatasetsShowWholeTensorsInH5dumpAndH5py) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{world.size(), 1, 1};
  SharedTempDir dir(world, "vds");
  // "bulk" (80 KiB per rank) is large enough that its bytes bypass HDF5 (direct I/O at the offset HDF5 allocated).
  constexpr int kBulk = 20000;
  TestModel model = make_model(layout, world.rank(), kBulk);
  Checkpointer ckpt(world, options_for(dir.path(), layout), model.shards);
  // The first checkpoint's files are written by HDF5, the next ones from their learned structure
  // (checkpoint/file_template.hpp): the second is the one read here.
  fill(model, 11);
  ckpt.save(2);
  fill(model, 77);
  ckpt.save(3);
  ckpt.wait();
  if (world.rank() == 0) {
    const std::string vds = dir / "step_3/checkpoint.h5";
    // h5dump: the column-parallel weight, split over every rank, printed whole.
    int status = 0;
    std::string out = run_command("/usr/bin/h5dump -d /layers.1.w1 -m %.9g " + vds + " 2>&1", &status);
    ASSERT_EQ(status, 0) << out;
    ASSERT_TRUE(has(out, "DATASPACE  SIMPLE { ( 8, 16 ) / ( 8, 16 ) }")) << out;
    std::string data = out.substr(out.find("DATA {") + 6);
    data = data.substr(0, data.find('}'));
    data = std::regex_replace(data, std::regex("\\(\\d+(,\\d+)*\\):"), " ");
    std::replace(data.begin(), data.end(), ',', ' ');
    std::istringstream values(data);
    std::vector<float> got;
    for (float v; values >> v;)
      got.push_back(v);
    ASSERT_EQ(got.size(), 128u) << out;
    for (std::uint64_t g = 0; g < 128; ++g) {
      float want;
      element_bytes(77, "layers.1.w1", DType::F32, g, &want);
      EXPECT_EQ(got[g], want) << "element " << g;
    }
    // h5py: several tensors and dtypes compared bitwise with the expected whole tensors.
    std::string args;
    for (auto [name, dtype, numpy, count] : {std::tuple{"embed", DType::F32, "f4", 96},
                                             {"layers.3.w1", DType::F32, "f4", 128},
                                             {"layers.0.bias", DType::F64, "f8", 8},
                                             {"optim/exp_avg", DType::F32, "f4", 1003},
                                             {"optim/master", DType::F32, "f4", 91},
                                             {"head/scale", DType::I64, "i8", 1},
                                             {"bulk", DType::F32, "f4", kBulk * world.size()}}) {
      std::string file = dir / (std::string("want_") + std::to_string(args.size()) + ".bin");
      std::ofstream o(file, std::ios::binary);
      for (int g = 0; g < count; ++g) {
        char b[8];
        element_bytes(77, name, dtype, g, b);
        o.write(b, dtype_size(dtype));
      }
      args += std::string(" ") + name + "," + numpy + "," + file;
    }
    const char* script =
        "import sys, h5py, numpy as np\n"
        "f = h5py.File(sys.argv[1], 'r')\n"
        "for spec in sys.argv[2:]:\n"
        "    name, dt, path = spec.split(',')\n"
        "    got = f[name][...]\n"
        "    want = np.fromfile(path, dtype=dt).reshape(got.shape)\n"
        "    if got.dtype != np.dtype(dt) or got.tobytes() != want.tobytes():\n"
        "        print('MISMATCH', name, got.dtype, got.ravel()[:4], want.ravel()[:4]); sys.exit(1)\n"
        "print('OK', len(sys.argv) - 2)\n";
    std::ofstream(dir / "check.py") << script;
    out = run_command("/usr/bin/python3 " + dir / "check.py" + " " + vds + args + " 2>&1", &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_TRUE(has(out, "OK 7")) << out;

    // The manifest's own checksum and checkpoint.h5's digest, verified by an independent CRC32C (bitwise Python) as
    // docs/checkpoint-format.md describes them.
    const char* digests =
        "import json, sys\n"
        "def crc32c(data):\n"
        "    crc = 0xffffffff\n"
        "    for b in data:\n"
        "        crc ^= b\n"
        "        for _ in range(8):\n"
        "            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)\n"
        "    return crc ^ 0xffffffff\n"
        "text = open(sys.argv[1] + '/manifest.json', 'rb').read()\n"
        "m = json.loads(text)\n"
        "assert list(m)[-1] == 'manifest_crc32c', list(m)\n"
        "assert crc32c(text[:text.rindex(b'\"manifest_crc32c\"')]) == m['manifest_crc32c'], 'manifest checksum'\n"
        "vds = open(sys.argv[1] + '/' + m['vds']['name'], 'rb').read()\n"
        "assert len(vds) == m['vds']['bytes'] and crc32c(vds) == m['vds']['crc32c'], 'vds digest'\n"
        "print('DIGESTS OK', m['version'])\n";
    std::ofstream(dir / "digests.py") << digests;
    out = run_command("/usr/bin/python3 " + dir / "digests.py" + " " + dir / "step_3" + " 2>&1", &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_TRUE(has(out, "DIGESTS OK 3")) << out;
  }
}

TEST(CheckpointMpi, RetentionProgressEmergencySaveAndBlobs) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "retention");
  TestModel model = make_model(layout, world.rank());
  Checkpointer ckpt(world, options_for(dir.path(), layout, /*keep=*/2), model.shards);
  for (std::uint64_t step = 1; step <= 4; ++step) {
    fill(model, step);
    Blobs blobs;
    put_value(blobs, "step", step);
    put_value(blobs, "rank", world.rank());
    ckpt.save(step, blobs);
    int polls = 0;
    while (!ckpt.progress()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ++polls;
    }
    EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(step));
  }
  // Two saves back to back: the second waits for the first; wait() commits the last.
  for (std::uint64_t step : {5, 6}) {
    fill(model, step);
    Blobs blobs;
    put_value(blobs, "rank", world.rank());
    ckpt.save(step, blobs);
  }
  ckpt.wait();
  EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(6));
  fill(model, 9);
  Blobs final_blobs;
  put_value(final_blobs, "step", std::uint64_t{9});
  put_value(final_blobs, "rank", world.rank());
  ckpt.emergency_save(9, final_blobs);
  EXPECT_FALSE(ckpt.in_flight());
  if (world.rank() == 0) {
    auto all = list_checkpoints(dir.path());
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0].step, 9u);
    EXPECT_EQ(all[1].step, 6u);
    EXPECT_EQ(fs::read_file(dir / "latest"), "step_9\n");
    EXPECT_FALSE(fs::exists(dir / "latest.tmp"));
    EXPECT_FALSE(fs::exists(dir / "step_9.tmp"));
  }
  scramble(model);
  LoadResult r = ckpt.load();
  EXPECT_EQ(r.step, 9u);
  EXPECT_EQ(mismatches(model, 9), 0u);
  EXPECT_EQ(get_value<std::uint64_t>(r.blobs, "step"), 9u);
  EXPECT_EQ(get_value<int>(r.blobs, "rank"), world.rank());
  LoadOptions other;
  other.blob_rank = 0;
  other.step = 6;
  r = ckpt.load(other);
  EXPECT_EQ(r.step, 6u);
  EXPECT_EQ(mismatches(model, 6), 0u);
  EXPECT_EQ(get_value<int>(r.blobs, "rank"), 0);
  EXPECT_THROW(get_value<double>(r.blobs, "nope"), UsageError);
}

TEST(CheckpointMpi, IoThreadTakesTheConfiguredNiceness) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "nice");
  TestModel model = make_model(layout, world.rank());
  CheckpointOptions o = options_for(dir.path(), layout);
  o.io_nice = 20;
  try {
    Checkpointer refused(world, o, model.shards);
    ADD_FAILURE() << "io_nice 20 accepted";
  } catch (const UsageError& e) {
    EXPECT_TRUE(has(e.what(), "use 0..19 (TENAX_CKPT_IO_NICE)")) << e.what();
  }
  EXPECT_EQ(thread_niceness("tenax-ckpt-io"), -100) << "no checkpointer is alive, so no I/O thread";
  const int base = ::getpriority(PRIO_PROCESS, 0);  // the suite may itself run under `nice`
  o.io_nice = 7;
  {
    Checkpointer ckpt(world, o, model.shards);
    fill(model, 4);
    ckpt.save(1);  // the thread has set its niceness before it runs its first job
    ckpt.wait();
    EXPECT_EQ(thread_niceness("tenax-ckpt-io"), std::min(19, base + 7));
  }
  o.io_nice = 0;
  Checkpointer plain(world, o, model.shards);
  plain.save(2);
  plain.wait();
  EXPECT_EQ(thread_niceness("tenax-ckpt-io"), base) << "0 leaves the training thread's priority";
}

// Scrambles the model, loads `step` from `dir` with a read-only checkpointer and expects the values filled with `seed`.
// The reader is given staging options no writer could use: it copies nothing into staging memory, so they are not
// checked.
void expect_loads(Communicator& world, const std::string& dir, const ParallelLayout& layout, TestModel& model,
                  std::uint64_t step, std::uint64_t seed, const std::string& what) {
  scramble(model);
  CheckpointOptions reader = options_for(dir, layout);
  reader.read_only = true;
  reader.staging_kernel = "crc32-3x-nt128";
  Checkpointer ckpt(world, reader, model.shards);
  EXPECT_EQ(ckpt.staging_threads(), 0) << "a read-only checkpointer stages nothing";
  EXPECT_EQ(ckpt.staging_kernel(), "");
  EXPECT_TRUE(ckpt.load(LoadOptions{.step = step}).loaded) << what;
  std::string first;
  EXPECT_EQ(mismatches(model, seed, &first), 0u) << what << ": first wrong " << first;
}

// A save copied by several threads (pieces checksummed apart and joined) must load bit for bit, its joined CRCs
// verified by load() against the bytes on disk, on any number of staging threads.
TEST(CheckpointMpi, StagingThreadsAreConfiguredAndEveryCountSavesTheSameCheckpoint) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "staging");
  TestModel model = make_model(layout, world.rank(), 3'000'017);  // ~12 MiB a rank: above the parallel threshold
  CheckpointOptions o = options_for(dir.path(), layout);
  o.staging_threads = 257;
  try {
    Checkpointer refused(world, o, model.shards);
    ADD_FAILURE() << "staging_threads 257 accepted";
  } catch (const UsageError& e) {
    EXPECT_TRUE(has(e.what(), "(TENAX_CKPT_STAGING_THREADS)")) << e.what();
  }
  for (int threads : {3, 1}) {
    o.staging_threads = threads;
    const std::uint64_t step = static_cast<std::uint64_t>(threads);
    {
      Checkpointer ckpt(world, o, model.shards);
      EXPECT_EQ(ckpt.staging_threads(), threads);
      EXPECT_EQ(threads_named("tenax-ckpt-stg"), threads - 1);
      fill(model, 40 + step);
      ckpt.save(step);
      ckpt.wait();
    }
    expect_loads(world, dir.path(), layout, model, step, 40 + step, std::to_string(threads) + " staging threads");
  }
}

// Every copy kernel this CPU has writes the same checkpoint (verified block by block by load()), the one asked for is
// the one used, and a name the CPU has no kernel of is refused on every rank, naming the ones it has.
TEST(CheckpointMpi, StagingKernelIsConfiguredAndEveryKernelSavesTheSameCheckpoint) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "staging-kernel");
  TestModel model = make_model(layout, world.rank(), 3'000'017);  // ~12 MiB a rank: spread over the helpers too
  CheckpointOptions o = options_for(dir.path(), layout);
  o.staging_threads = 2;
  o.staging_kernel = "crc32-3x-nt128";
  try {
    Checkpointer refused(world, o, model.shards);
    ADD_FAILURE() << "staging_kernel crc32-3x-nt128 accepted";
  } catch (const UsageError& e) {
    EXPECT_TRUE(has(e.what(), "'crc32-3x-nt128' is not a copy kernel this CPU has")) << e.what();
    EXPECT_TRUE(has(e.what(), ckpt::crc32c_copy_kernel_names())) << e.what();
    EXPECT_TRUE(has(e.what(), "(TENAX_CKPT_STAGING_KERNEL)")) << e.what();
  }
  // Ranks that disagree (another CPU, another setting) fail together, each naming the rank whose name was refused,
  // and stay in step for what follows.
  o.staging_kernel = world.rank() == world.size() - 1 ? "crc32-3x-nt128" : "auto";
  try {
    Checkpointer refused(world, o, model.shards);
    ADD_FAILURE() << "staging_kernel crc32-3x-nt128 on the last rank accepted";
  } catch (const UsageError& e) {
    EXPECT_TRUE(has(e.what(), "rank " + std::to_string(world.size() - 1) + ": checkpoint: staging_kernel")) << e.what();
  }
  world.barrier();
  {
    const ScopedEnv checkpoint_dir("TENAX_CHECKPOINT_DIR", dir.path().c_str());
    const ScopedEnv kernel("TENAX_CKPT_STAGING_KERNEL", "tables");
    EXPECT_EQ(CheckpointOptions::from_env(layout).staging_kernel, "tables");
  }
  for (const char* automatic_name : {"", "auto"}) {
    o.staging_kernel = automatic_name;
    Checkpointer automatic(world, o, model.shards);
    EXPECT_EQ(automatic.staging_kernel(), ckpt::crc32c_copy_kernels().front().name)
        << "'" << automatic_name << "': the CPU's first";
  }
  std::uint64_t step = 0;
  for (const ckpt::Crc32cCopyKernel& kernel : ckpt::crc32c_copy_kernels()) {
    o.staging_kernel = kernel.name;
    ++step;
    {
      Checkpointer ckpt(world, o, model.shards);
      EXPECT_EQ(ckpt.staging_kernel(), kernel.name);
      fill(model, 70 + step);
      ckpt.save(step);
      ckpt.wait();
    }
    expect_loads(world, dir.path(), layout, model, step, 70 + step, kernel.name);
  }
}

// Device shards without the producer's stream would be copied unordered with its kernels: refused up front (no GPU
// needed to check that; a build without CUDA refuses device shards altogether).
TEST(CheckpointMpi, DeviceShardsWithoutTheirStreamAreRefused) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "nostream");
  float fake[4] = {};
  std::vector<TensorShard> shards{TensorShard::whole("w", DType::F32, {4}, fake)};
  shards[0].memory = MemoryKind::Device;
  try {
    Checkpointer ckpt(world, options_for(dir.path(), layout), shards);
    ADD_FAILURE() << "device shards without a stream were accepted";
  } catch (const UsageError& e) {
    const bool cuda = TENAX_HAVE_CUDA;
    EXPECT_TRUE(has(e.what(), cuda ? "need CheckpointOptions::cuda_stream" : "built without CUDA")) << e.what();
  }
}

// The store path a save took is counted: every file written and its size, and how much of it went around the page
// cache (none when direct I/O is off; with it on, at most the file, and all but the HDF5 structure where the file
// system takes O_DIRECT).
TEST(CheckpointMpi, WriteTotalsCountTheFilesAndTheStorePathTaken) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  for (const bool direct : {false, true}) {
    SharedTempDir dir(world, direct ? "totals-direct" : "totals-buffered");
    TestModel model = make_model(layout, world.rank());
    CheckpointOptions options = options_for(dir.path(), layout, /*keep=*/2);
    options.direct_io = direct;
    Checkpointer ckpt(world, options, model.shards);
    EXPECT_EQ(ckpt.write_totals().files, 0u);
    std::uint64_t on_disk = 0;
    for (std::uint64_t step = 1; step <= 2; ++step) {
      fill(model, step);
      ckpt.save(step);
      ckpt.wait();
      on_disk +=
          std::filesystem::file_size(dir / ("step_" + std::to_string(step) + "/" + ckpt::rank_file_name(world.rank())));
    }
    const Checkpointer::WriteTotals totals = ckpt.write_totals();
    EXPECT_EQ(totals.files, 2u);
    EXPECT_EQ(totals.bytes, on_disk);
    EXPECT_LE(totals.direct_bytes, totals.bytes);
    if (!direct) {
      EXPECT_EQ(totals.direct_bytes, 0u);
    }
  }
}

TEST(CheckpointMpi, EmptyDirectoryIsAFreshStart) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{1, 1, world.size()};
  SharedTempDir dir(world, "fresh");
  TestModel model = make_model(layout, world.rank());
  fill(model, 3);
  Checkpointer ckpt(world, options_for(dir / "new/sub", layout), model.shards);
  LoadResult r = ckpt.load();
  EXPECT_FALSE(r.loaded);
  EXPECT_EQ(mismatches(model, 3), 0u) << "a fresh start leaves the shards alone";
}

// The error is raised by the next save() once that checkpoint is under way: a failed write does not cost the next one.
TEST(CheckpointMpi, WriteErrorIsRaisedAtTheNextSaveAndTheCheckpointerRecovers) {
  Communicator& world = tenax::test::world();
  const ParallelLayout layout{world.size(), 1, 1};
  SharedTempDir dir(world, "ioerror");
  TestModel model = make_model(layout, world.rank());
  Checkpointer ckpt(world, options_for(dir.path(), layout), model.shards);
  fill(model, 1);
  ckpt.save(1);
  ckpt.wait();
  // A file where step 2's directory must go: every rank's write fails (root ignores permissions, so use
  // ENOTDIR/EEXIST).
  if (world.rank() == 0) std::ofstream(dir / "step_2.tmp") << "in the way";
  world.barrier();
  fill(model, 2);
  ckpt.save(2);
  std::string message;
  try {
    ckpt.save(3);
  } catch (const IoError& e) {
    message = e.what();
  }
  EXPECT_TRUE(has(message, "checkpoint step 2 failed")) << message;
  EXPECT_TRUE(has(message, "step_2.tmp")) << message;
  EXPECT_TRUE(has(message, "rank 0: ")) << message;
  EXPECT_EQ(ckpt.step_being_written(), std::optional<std::uint64_t>(3)) << "step 3 is under way all the same";
  world.barrier();
  if (world.rank() == 0) {
    EXPECT_FALSE(fs::exists(dir / "step_2.tmp")) << "the partial checkpoint is removed";
  }
  ckpt.wait();
  EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(3));
  fill(model, 4);
  ckpt.save(4);
  ckpt.wait();
  scramble(model);
  EXPECT_EQ(ckpt.load().step, 4u);
  EXPECT_EQ(mismatches(model, 4), 0u);
}

}  // namespace
}  // namespace tenax::test
