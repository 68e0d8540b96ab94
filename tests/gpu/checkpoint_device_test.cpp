// Checkpoints of device-memory shards: save() stages them with cudaMemcpyAsync on the caller's stream into the pinned
// staging buffer and returns; work enqueued on that stream afterwards may overwrite them; the files and checksums are
// identical to a save of the same bytes from host memory; load() fills device shards, resharded across ranks.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "checkpoint/manifest.hpp"
#include "common/mpi_test.hpp"
#include "core/file_system.hpp"
#include "tenax/checkpoint.hpp"
#include "test_dirs.hpp"

namespace tenax::test {
namespace {

bool have_device() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

constexpr std::uint64_t kRows = 64, kCols = 1000;  // 256 KB of f32: large enough for the direct-I/O path

float pattern(std::uint64_t global_index, int seed) {
  return static_cast<float>((global_index * 2654435761ull + static_cast<std::uint64_t>(seed)) % 100003) * 0.25f;
}

// This rank's rows of the [kRows, kCols] tensor "w", and its flat range of the 1-D tensor "m" as two blocks.
struct Layout {
  std::uint64_t row0, rows, m_begin, m_split, m_end;
  Layout(int rank, int size) {
    rows = kRows / size;
    row0 = rows * rank;
    const std::uint64_t m_total = 12345, per = m_total / size;
    m_begin = per * rank;
    m_end = rank == size - 1 ? m_total : m_begin + per;
    m_split = m_begin + (m_end - m_begin) / 3;
  }
};

class DeviceCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_device()) {
      if (gpu_required()) FAIL() << "TENAX_TEST_GPU=1 but no CUDA device is usable";
      GTEST_SKIP() << "no CUDA device";
    }
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    for (void* p : device_)
      cudaFree(p);
    if (stream_) cudaStreamDestroy(stream_);
  }
  float* device_floats(std::size_t n) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, n * sizeof(float)), cudaSuccess);
    device_.push_back(p);
    return static_cast<float*>(p);
  }
  // Host values of this rank's blocks, in shard order.
  static std::vector<std::vector<float>> host_blocks(const Layout& l, int seed) {
    std::vector<float> w(l.rows * kCols), m1(l.m_split - l.m_begin), m2(l.m_end - l.m_split);
    for (std::uint64_t i = 0; i < w.size(); ++i)
      w[i] = pattern(l.row0 * kCols + i, seed);
    for (std::uint64_t i = 0; i < m1.size(); ++i)
      m1[i] = pattern(l.m_begin + i, seed + 1);
    for (std::uint64_t i = 0; i < m2.size(); ++i)
      m2[i] = pattern(l.m_split + i, seed + 1);
    return {w, m1, m2};
  }
  static std::vector<TensorShard> shards(const Layout& l, const std::vector<void*>& data, MemoryKind memory) {
    std::vector<TensorShard> s{
        TensorShard::block("w", DType::F32, {kRows, kCols}, {l.row0, 0}, {l.rows, kCols}, data[0]),
        TensorShard::flat_range("m", DType::F32, 12345, l.m_begin, l.m_split - l.m_begin, data[1]),
        TensorShard::flat_range("m", DType::F32, 12345, l.m_split, l.m_end - l.m_split, data[2])};
    for (auto& x : s)
      x.memory = memory;
    return s;
  }
  cudaStream_t stream_ = nullptr;
  std::vector<void*> device_;
};

TEST_F(DeviceCheckpoint, DeviceShardsSaveLikeHostShardsAndLoadBackResharded) {
  Communicator& world = tenax::test::world();
  const Layout l(world.rank(), world.size());
  const auto host = host_blocks(l, 3);
  std::vector<void*> dev;
  for (const auto& b : host) {
    float* d = device_floats(b.size());
    ASSERT_EQ(cudaMemcpy(d, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    dev.push_back(d);
  }
  // The copies above ran on the legacy stream, which does not order with the non-blocking stream_ below.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  SharedTempDir device_dir(world, "device-ckpt"), host_dir(world, "host-ckpt");
  {
    CheckpointOptions o;
    o.dir = device_dir.path();
    o.layout = ParallelLayout{1, 1, world.size()};
    o.cuda_stream = stream_;
    Checkpointer ckpt(world, o, shards(l, dev, MemoryKind::Device));
    ckpt.save(1);
    // Allowed by the API: work on the producing stream after save() returns may overwrite the shards.
    for (std::size_t i = 0; i < dev.size(); ++i)
      ASSERT_EQ(cudaMemsetAsync(dev[i], 0xff, host[i].size() * sizeof(float), stream_), cudaSuccess);
    ckpt.wait();
  }
  {
    std::vector<void*> host_ptrs;
    auto copy = host;
    for (auto& b : copy)
      host_ptrs.push_back(b.data());
    CheckpointOptions o;
    o.dir = host_dir.path();
    o.layout = ParallelLayout{1, 1, world.size()};
    Checkpointer ckpt(world, o, shards(l, host_ptrs, MemoryKind::Host));
    ckpt.save(1);
    ckpt.wait();
  }
  // The same bytes give the same checksums whichever memory they came from.
  const auto from_device = ckpt::Manifest::from_json(fs::read_file(device_dir / "step_1/manifest.json"));
  const auto from_host = ckpt::Manifest::from_json(fs::read_file(host_dir / "step_1/manifest.json"));
  ASSERT_EQ(from_device.tensors.size(), from_host.tensors.size());
  for (std::size_t t = 0; t < from_host.tensors.size(); ++t) {
    ASSERT_EQ(from_device.tensors[t].blocks.size(), from_host.tensors[t].blocks.size());
    for (std::size_t b = 0; b < from_host.tensors[t].blocks.size(); ++b)
      EXPECT_EQ(from_device.tensors[t].blocks[b].crc32c, from_host.tensors[t].blocks[b].crc32c)
          << from_host.tensors[t].name << " block " << b;
  }

  // Load on a single rank into whole device tensors (a different layout), and check every element.
  if (world.rank() == 0) {
    std::unique_ptr<Communicator> self = world.split(0, 0, "self");
    float* w = device_floats(kRows * kCols);
    float* m = device_floats(12345);
    ASSERT_EQ(cudaMemset(w, 0, kRows * kCols * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // as above: the load's copies run on stream_
    CheckpointOptions o;
    o.dir = device_dir.path();
    o.cuda_stream = stream_;
    std::vector<TensorShard> whole{TensorShard::whole("w", DType::F32, {kRows, kCols}, w),
                                   TensorShard::whole("m", DType::F32, {12345}, m)};
    for (auto& s : whole)
      s.memory = MemoryKind::Device;
    Checkpointer reader(*self, o, whole);
    LoadResult r = reader.load();
    ASSERT_TRUE(r.loaded);
    std::vector<float> got_w(kRows * kCols), got_m(12345);
    ASSERT_EQ(cudaMemcpy(got_w.data(), w, got_w.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got_m.data(), m, got_m.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    std::uint64_t wrong = 0;
    for (std::uint64_t i = 0; i < got_w.size(); ++i)
      wrong += got_w[i] != pattern(i, 3);
    for (std::uint64_t i = 0; i < got_m.size(); ++i)
      wrong += got_m[i] != pattern(i, 4);
    EXPECT_EQ(wrong, 0u);
  } else {
    std::unique_ptr<Communicator> none = world.split(-1, world.rank(), "self");
    EXPECT_EQ(none, nullptr);
  }
  world.barrier();
}

}  // namespace
}  // namespace tenax::test
