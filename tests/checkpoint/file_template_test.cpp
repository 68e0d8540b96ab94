// A rank file, and a checkpoint's VDS file, written from its learned structure (file_template.hpp) is byte for byte
// the file HDF5 writes for the same values, reads back with its step, CRCs and data, and a change of structure is
// relearned, never patched.
#include "checkpoint/file_template.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "checkpoint/manifest.hpp"
#include "checkpoint/shard_file.hpp"
#include "checkpoint/vds_file.hpp"
#include "tenax/error.hpp"

namespace tenax::ckpt {
namespace {

struct Scratch {
  std::filesystem::path dir;
  Scratch() {
    char tmpl[] = "/tmp/tenax-rank-template-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~Scratch() { std::filesystem::remove_all(dir); }
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
};

std::vector<std::uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// One rank's state of a small model: large blocks (written around the page cache where allowed), small ones (biases,
// in the structure's writes), several dtypes, an empty block, and blobs; `version` changes every value.
struct RankState {
  std::vector<std::vector<float>> tensors;
  std::vector<std::uint16_t> half;
  std::vector<std::vector<std::uint8_t>> blob_bytes;
  std::vector<ShardWrite> shards;
  std::vector<BlobWrite> blobs;
  RankFileHeader header;

  explicit RankState(std::uint64_t step, int version, std::size_t blob_size = 24) {
    const std::vector<std::uint64_t> sizes = {70000, 100, 64, 20000, 1, 0, 40000};
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      tensors.emplace_back(sizes[t]);
      for (std::size_t i = 0; i < sizes[t]; ++i)
        tensors[t][i] = static_cast<float>(version * 1000 + t) + 0.25f * static_cast<float>(i % 97);
    }
    half.assign(50000, static_cast<std::uint16_t>(0x3c00 + version));
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      const std::string name = "layer" + std::to_string(t) + ".weight";
      shards.push_back(ShardWrite{name,
                                  block_dataset(name, 0, 1),
                                  DType::F32,
                                  {2 * sizes[t]},
                                  Box{{sizes[t]}, {sizes[t]}},
                                  tensors[t].data(),
                                  static_cast<std::uint32_t>(0x1000 * version + t)});
    }
    shards.push_back(ShardWrite{"embedding",
                                block_dataset("embedding", 0, 1),
                                DType::F16,
                                {500, 100},
                                Box{{0, 0}, {500, 100}},
                                half.data(),
                                static_cast<std::uint32_t>(0xabc + version)});
    blob_bytes = {std::vector<std::uint8_t>(blob_size, static_cast<std::uint8_t>(version)),
                  std::vector<std::uint8_t>(8, static_cast<std::uint8_t>(7 * version))};
    blobs = {BlobWrite{"data_position", &blob_bytes[0], static_cast<std::uint32_t>(0x5150 + version)},
             BlobWrite{"rng", &blob_bytes[1], static_cast<std::uint32_t>(0x7070 + version)}};
    header = RankFileHeader{step, 1, 4, ParallelLayout{2, 1, 2}};
  }
};

RankFileWritten write(const std::string& path, const RankState& s, FileTemplate* reuse, bool direct = true) {
  return write_rank_file(path, s.header, s.shards, s.blobs, direct, reuse);
}

std::uint64_t file_step(const std::string& path) {
  h5::Handle file = h5::file_open_read(path);
  h5::Handle attr(H5Aopen(file, "step", H5P_DEFAULT), H5Aclose);
  std::uint64_t step = 0;
  EXPECT_GE(H5Aread(attr, H5T_NATIVE_UINT64, &step), 0);
  return step;
}

TEST(FileTemplate, LaterFilesAreTheBytesHdf5WritesForTheSameValues) {
  Scratch scratch;
  FileTemplate reuse;
  const RankState first(10, 1), second(20, 2), third(30, 3);
  // The first through HDF5 with sentinels, learned, then stamped with its real values; the next from the template.
  EXPECT_FALSE(write(scratch / "first.h5", first, &reuse).structure_reused);
  EXPECT_TRUE(write(scratch / "second.h5", second, &reuse).structure_reused);
  EXPECT_TRUE(write(scratch / "third.h5", third, &reuse, /*direct=*/false).structure_reused);
  // The same values through HDF5 alone.
  write(scratch / "first-hdf5.h5", first, nullptr);
  write(scratch / "second-hdf5.h5", second, nullptr);
  write(scratch / "third-hdf5.h5", third, nullptr);
  for (const char* name : {"first", "second", "third"}) {
    const auto ours = read_all(scratch / (std::string(name) + ".h5"));
    const auto hdf5 = read_all(scratch / (std::string(name) + "-hdf5.h5"));
    ASSERT_GT(ours.size(), 300000u);
    EXPECT_TRUE(ours == hdf5) << name << ": " << ours.size() << " bytes against HDF5's " << hdf5.size();
  }
  EXPECT_FALSE(read_all(scratch / "second.h5") == read_all(scratch / "third.h5")) << "the values differ";
}

TEST(FileTemplate, AFileFromTheTemplateReadsBackItsStepCrcsAndData) {
  Scratch scratch;
  FileTemplate reuse;
  write(scratch / "first.h5", RankState(10, 1), &reuse);
  const RankState second(20, 2);
  ASSERT_TRUE(write(scratch / "second.h5", second, &reuse).structure_reused);
  EXPECT_EQ(file_step(scratch / "second.h5"), 20u);
  RankFileReader reader(scratch / "second.h5");
  for (const ShardWrite& s : second.shards) {
    const BlockAttributes a = reader.attributes(s.dataset);
    EXPECT_EQ(a.crc32c, s.crc32c) << s.dataset;
    EXPECT_EQ(a.tensor, s.tensor);
    EXPECT_EQ(a.shape, s.box.shape);
  }
  std::vector<float> back(70000);
  reader.read_block(second.shards[0].dataset, DType::F32, {70000}, back.data(), {70000}, {0});
  EXPECT_EQ(back, second.tensors[0]);
  std::vector<float> bias(100);
  reader.read_block(second.shards[1].dataset, DType::F32, {100}, bias.data(), {100}, {0});
  EXPECT_EQ(bias, second.tensors[1]) << "a small block, written with the structure's bytes";
  EXPECT_EQ(reader.read_bytes(blob_dataset("data_position"), 24), second.blob_bytes[0]);
}

TEST(FileTemplate, AnotherStructureIsLearnedAgainNeverPatched) {
  Scratch scratch;
  FileTemplate reuse;
  write(scratch / "first.h5", RankState(10, 1), &reuse);
  // A blob that grew moves what follows it: the template no longer fits.
  const RankState grown(20, 2, /*blob_size=*/4000);
  EXPECT_FALSE(write(scratch / "grown.h5", grown, &reuse).structure_reused);
  write(scratch / "grown-hdf5.h5", grown, nullptr);
  EXPECT_TRUE(read_all(scratch / "grown.h5") == read_all(scratch / "grown-hdf5.h5"));
  // Another rank's header (its own file) too.
  RankState other(30, 3, 4000);
  other.header.rank = 2;
  EXPECT_FALSE(write(scratch / "other.h5", other, &reuse).structure_reused);
  write(scratch / "other-hdf5.h5", other, nullptr);
  EXPECT_TRUE(read_all(scratch / "other.h5") == read_all(scratch / "other-hdf5.h5"));
  // And then it is reused for that structure.
  RankState again(40, 4, 4000);
  again.header.rank = 2;
  EXPECT_TRUE(write(scratch / "again.h5", again, &reuse).structure_reused);
}

TEST(FileTemplate, AnExistingFileIsRefused) {
  Scratch scratch;
  FileTemplate reuse;
  write(scratch / "first.h5", RankState(10, 1), &reuse);
  std::ofstream(scratch / "taken.h5") << "saved";
  EXPECT_THROW(write(scratch / "taken.h5", RankState(20, 2), &reuse), IoError);
  EXPECT_THROW(write(scratch / "taken.h5", RankState(20, 2), nullptr), IoError);
  const auto kept = read_all(scratch / "taken.h5");
  EXPECT_EQ(std::string(kept.begin(), kept.end()), "saved") << "a file already there is never written over or removed";
}

// The VDS file of a checkpoint of 2 ranks: tensors split over both files, and a tensor held whole by one.
Manifest two_rank_manifest(std::uint64_t step, int tensors) {
  Manifest m;
  m.step = step;
  m.world_size = 2;
  m.layout = ParallelLayout{2, 1, 1};
  for (int t = 0; t < tensors; ++t) {
    ManifestTensor tensor{"block" + std::to_string(t) + ".weight", t % 2 == 0 ? DType::F32 : DType::BF16, {64, 32}, {}};
    for (int r = 0; r < 2; ++r)
      tensor.blocks.push_back(ManifestBlock{r, block_dataset(tensor.name, 0, 1), Box{{32ull * r, 0}, {32, 32}},
                                            32 * 32 * dtype_size(tensor.dtype), 0});
    m.tensors.push_back(tensor);
  }
  m.tensors.push_back(ManifestTensor{
      "embedding", DType::F32, {10}, {ManifestBlock{0, block_dataset("embedding", 0, 1), Box{{0}, {10}}, 40, 0}}});
  return m;
}

TEST(FileTemplate, TheVdsFileOfLaterCommitsIsTheBytesHdf5Writes) {
  Scratch scratch;
  FileTemplate reuse;
  for (std::uint64_t step : {100u, 200u, 300u})
    EXPECT_EQ(write_vds_file(scratch / ("vds-" + std::to_string(step) + ".h5"), two_rank_manifest(step, 40), &reuse),
              step != 100)
        << "the first learned, the others from the template";
  for (std::uint64_t step : {100u, 200u, 300u}) {
    const std::string ours = scratch / ("vds-" + std::to_string(step) + ".h5");
    const std::string hdf5 = scratch / ("vds-" + std::to_string(step) + "-hdf5.h5");
    write_vds_file(hdf5, two_rank_manifest(step, 40), nullptr);
    EXPECT_TRUE(read_all(ours) == read_all(hdf5)) << step;
    EXPECT_EQ(file_step(ours), step);
  }
  // Another plan (more tensors): learned again, and right.
  EXPECT_FALSE(write_vds_file(scratch / "more.h5", two_rank_manifest(400, 41), &reuse));
  write_vds_file(scratch / "more-hdf5.h5", two_rank_manifest(400, 41), nullptr);
  EXPECT_TRUE(read_all(scratch / "more.h5") == read_all(scratch / "more-hdf5.h5"));
}

}  // namespace
}  // namespace tenax::ckpt
