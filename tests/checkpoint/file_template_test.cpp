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

// Writes `s` three times with `reuse` (under <name>-a/-b/-c.h5): plain HDF5 (a structure seen once), HDF5 with
// sentinels then learned (seen twice), then from the template. Returns whether the last came from the template.
bool write_until_reused(const Scratch& scratch, const std::string& name, const RankState& s, FileTemplate& reuse) {
  EXPECT_FALSE(write(scratch / (name + "-a.h5"), s, &reuse).structure_reused);
  EXPECT_FALSE(write(scratch / (name + "-b.h5"), s, &reuse).structure_reused);
  return write(scratch / (name + "-c.h5"), s, &reuse).structure_reused;
}

// Every object of the file (groups and datasets) without times: HDF5 would otherwise write the clock into each, and
// a file would not be a function of its contents.
void expect_no_times(const std::string& path) {
  h5::Handle file = h5::file_open_read(path);
  int objects = 0;
  auto visit = [](hid_t, const char* name, const H5O_info_t* info, void* data) -> herr_t {
    ++*static_cast<int*>(data);
    EXPECT_EQ(info->mtime, 0) << name;
    EXPECT_EQ(info->ctime, 0) << name;
    EXPECT_EQ(info->atime, 0) << name;
    EXPECT_EQ(info->btime, 0) << name;
    return 0;
  };
  ASSERT_GE(H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_NATIVE, visit, &objects, H5O_INFO_TIME), 0);
  EXPECT_GT(objects, 10) << path;
}

TEST(FileTemplate, LaterFilesAreTheBytesHdf5WritesForTheSameValues) {
  Scratch scratch;
  FileTemplate reuse;
  const RankState first(10, 1), second(20, 2), third(30, 3), fourth(40, 4);
  // The first through HDF5; the second through HDF5 with sentinels, learned, then stamped with its real values; the
  // next ones from the template.
  EXPECT_FALSE(write(scratch / "first.h5", first, &reuse).structure_reused);
  EXPECT_FALSE(write(scratch / "second.h5", second, &reuse).structure_reused);
  EXPECT_TRUE(write(scratch / "third.h5", third, &reuse).structure_reused);
  EXPECT_TRUE(write(scratch / "fourth.h5", fourth, &reuse, /*direct=*/false).structure_reused);
  for (const auto* s : {&first, &second, &third, &fourth}) {
    const std::string name = std::to_string(s->header.step);
    write(scratch / (name + "-hdf5.h5"), *s, nullptr);
  }
  for (const auto& [ours, step] : {std::pair{"first.h5", 10}, {"second.h5", 20}, {"third.h5", 30}, {"fourth.h5", 40}}) {
    const auto bytes = read_all(scratch / ours);
    const auto hdf5 = read_all(scratch / (std::to_string(step) + "-hdf5.h5"));
    ASSERT_GT(bytes.size(), 300000u);
    EXPECT_TRUE(bytes == hdf5) << ours << ": " << bytes.size() << " bytes against HDF5's " << hdf5.size();
    EXPECT_EQ(file_step(scratch / ours), static_cast<std::uint64_t>(step));
  }
  EXPECT_FALSE(read_all(scratch / "third.h5") == read_all(scratch / "fourth.h5")) << "the values differ";
  expect_no_times(scratch / "fourth.h5");
}

TEST(FileTemplate, AFileFromTheTemplateReadsBackItsStepCrcsAndData) {
  Scratch scratch;
  FileTemplate reuse;
  write(scratch / "first.h5", RankState(10, 1), &reuse);
  write(scratch / "second.h5", RankState(15, 5), &reuse);
  const RankState later(20, 2);
  ASSERT_TRUE(write(scratch / "later.h5", later, &reuse).structure_reused);
  EXPECT_EQ(file_step(scratch / "later.h5"), 20u);
  RankFileReader reader(scratch / "later.h5");
  for (const ShardWrite& s : later.shards) {
    const BlockAttributes a = reader.open(s.dataset).attributes();
    EXPECT_EQ(a.crc32c, s.crc32c) << s.dataset;
    EXPECT_EQ(a.tensor, s.tensor);
    EXPECT_EQ(a.shape, s.box.shape);
  }
  std::vector<float> back(70000);
  reader.read_block(later.shards[0].dataset, DType::F32, {70000}, back.data(), {70000}, {0});
  EXPECT_EQ(back, later.tensors[0]);
  std::vector<float> bias(100);
  reader.read_block(later.shards[1].dataset, DType::F32, {100}, bias.data(), {100}, {0});
  EXPECT_EQ(bias, later.tensors[1]) << "a small block, written with the structure's bytes";
  EXPECT_EQ(reader.read_bytes(blob_dataset("data_position"), 24), later.blob_bytes[0]);
}

TEST(FileTemplate, AnotherStructureIsLearnedAgainNeverPatched) {
  Scratch scratch;
  FileTemplate reuse;
  ASSERT_TRUE(write_until_reused(scratch, "base", RankState(10, 1), reuse));
  // Each of these changes what HDF5 writes around the data; none may be patched from the template.
  RankState grown(20, 2, /*blob_size=*/4000);  // a blob that grew moves what follows it
  RankState other_rank(20, 2);                 // another rank's header
  other_rank.header.rank = 2;
  RankState bf16(20, 2);  // the same bytes per element, another datatype
  bf16.shards.back().dtype = DType::BF16;
  RankState moved(20, 2);  // the same shape at another place in the tensor
  moved.shards[0].box.offset = {0};
  RankState wider(20, 2);  // the same block in a larger tensor
  wider.shards[0].global_shape = {4 * 70000};
  for (const auto& [name, state] : {std::pair<std::string, const RankState*>{"grown", &grown},
                                    {"other_rank", &other_rank},
                                    {"bf16", &bf16},
                                    {"moved", &moved},
                                    {"wider", &wider}}) {
    EXPECT_FALSE(write(scratch / (name + ".h5"), *state, &reuse).structure_reused) << name;
    write(scratch / (name + "-hdf5.h5"), *state, nullptr);
    EXPECT_TRUE(read_all(scratch / (name + ".h5")) == read_all(scratch / (name + "-hdf5.h5"))) << name;
    EXPECT_TRUE(write(scratch / (name + "-base.h5"), RankState(30, 3), &reuse).structure_reused)
        << "a structure seen once leaves the template of the usual one in place";
  }
  // A structure that comes back twice in a row is learned again.
  EXPECT_TRUE(write_until_reused(scratch, "grown-again", grown, reuse));
}

TEST(FileTemplate, AStructureThatChangesEveryTimeIsWrittenByHdf5) {
  Scratch scratch;
  FileTemplate reuse;
  for (int i = 0; i < 6; ++i) {
    // A blob whose size changes at every checkpoint: learning it would cost a second pass every time, for nothing.
    const RankState s(10 + i, i, /*blob_size=*/24 + 8 * static_cast<std::size_t>(i));
    const std::string name = "changing-" + std::to_string(i);
    EXPECT_FALSE(write(scratch / (name + ".h5"), s, &reuse).structure_reused);
    write(scratch / (name + "-hdf5.h5"), s, nullptr);
    EXPECT_TRUE(read_all(scratch / (name + ".h5")) == read_all(scratch / (name + "-hdf5.h5")));
  }
}

TEST(FileTemplate, ManyBlocksGoOutInSeveralVectoredWrites) {
  // More pieces (runs and small blocks) than one pwritev takes (IOV_MAX, 1024).
  Scratch scratch;
  RankState many(10, 1);
  many.tensors.assign(700, std::vector<float>(16, 1.5f));
  many.shards.clear();
  for (int t = 0; t < 700; ++t) {
    const std::string name = "block" + std::to_string(t) + ".bias";
    many.shards.push_back(ShardWrite{name,
                                     block_dataset(name, 0, 1),
                                     DType::F32,
                                     {16},
                                     Box{{0}, {16}},
                                     many.tensors[static_cast<std::size_t>(t)].data(),
                                     static_cast<std::uint32_t>(t)});
  }
  FileTemplate reuse;
  ASSERT_TRUE(write_until_reused(scratch, "many", many, reuse));
  write(scratch / "many-hdf5.h5", many, nullptr);
  EXPECT_TRUE(read_all(scratch / "many-c.h5") == read_all(scratch / "many-hdf5.h5"));
}

// learn() on files made by hand: a sentinel that is missing, found twice, or found only across the end of a run (a
// dataset's storage in between) is no attribute value, and the structure is then never tried again.
TEST(FileTemplate, LearningRefusesASentinelNotFoundExactlyOnce) {
  Scratch scratch;
  const FileStamps sentinels{0x1122334455667788ull, {0xa1b2c3d4u}};
  const FileStamps stamps{7, {9}};
  auto file_with = [&](const std::string& name, const std::vector<std::uint8_t>& bytes) {
    std::ofstream(scratch / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return scratch / name;
  };
  auto le = [](std::uint64_t v, int n) {
    std::vector<std::uint8_t> out;
    for (int i = 0; i < n; ++i)
      out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
    return out;
  };
  auto cat = [](std::initializer_list<std::vector<std::uint8_t>> parts) {
    std::vector<std::uint8_t> out;
    for (const auto& p : parts)
      out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  const std::vector<std::uint8_t> pad(16, 0), step = le(sentinels.step, 8), crc = le(sentinels.crcs[0], 4);

  FileTemplate good;
  const std::string ok = file_with("ok", cat({pad, step, pad, crc, pad}));
  EXPECT_TRUE(good.learn("k", ok, {}, sentinels, stamps));
  EXPECT_TRUE(good.fits("k"));
  EXPECT_EQ(read_all(ok), cat({pad, le(7, 8), pad, le(9, 4), pad})) << "stamped in place";
  // With a dataset's storage (bytes 26-33) before the CRC: the CRC is stamped at its place in the file.
  FileTemplate around;
  const std::string gap = file_with("gap", cat({pad, step, pad, pad, crc, pad}));
  EXPECT_TRUE(around.learn("k", gap, {DatasetRange{26, 8}}, sentinels, stamps));
  EXPECT_EQ(read_all(gap), cat({pad, le(7, 8), pad, pad, le(9, 4), pad}));

  const std::vector<std::pair<std::string, std::vector<std::uint8_t>>> bad = {
      {"no crc", cat({pad, step, pad})},
      {"crc twice", cat({pad, step, crc, pad, crc})},
      {"step twice", cat({step, pad, crc, step})},
  };
  for (const auto& [name, bytes] : bad) {
    FileTemplate t;
    EXPECT_FALSE(t.learn("k", file_with(name, bytes), {}, sentinels, stamps)) << name;
    EXPECT_FALSE(t.fits("k")) << name;
    t.worth_learning("k");
    EXPECT_FALSE(t.worth_learning("k")) << name << ": seen twice, but its learning failed: not tried again";
  }
  // The CRC's bytes split by a dataset's storage (offsets 18-19 and 24-25 around bytes 20-23): contiguous only in the
  // bytes read back, never in the file.
  std::vector<std::uint8_t> split = step;
  split.resize(40, 0);
  std::copy(crc.begin(), crc.begin() + 2, split.begin() + 18);
  std::copy(crc.begin() + 2, crc.end(), split.begin() + 24);
  FileTemplate t;
  EXPECT_FALSE(t.learn("k", file_with("split", split), {DatasetRange{20, 4}}, sentinels, stamps));
}

TEST(FileTemplate, AnExistingFileIsRefused) {
  Scratch scratch;
  FileTemplate reuse;
  ASSERT_TRUE(write_until_reused(scratch, "base", RankState(10, 1), reuse));
  std::ofstream(scratch / "taken.h5") << "saved";
  EXPECT_THROW(write(scratch / "taken.h5", RankState(20, 2), &reuse), IoError);
  try {
    write(scratch / "taken.h5", RankState(20, 2), nullptr);
    ADD_FAILURE() << "an existing rank file was not refused";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("another program (or another Engine in this one) is saving step 20"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(write_vds_file(scratch / "taken.h5", Manifest{}, nullptr), IoError);
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
  for (std::uint64_t step : {100u, 200u, 300u, 400u})
    EXPECT_EQ(write_vds_file(scratch / ("vds-" + std::to_string(step) + ".h5"), two_rank_manifest(step, 40), &reuse),
              step >= 300)
        << "the first through HDF5, the second learned, the others from the template";
  for (std::uint64_t step : {100u, 200u, 300u, 400u}) {
    const std::string ours = scratch / ("vds-" + std::to_string(step) + ".h5");
    const std::string hdf5 = scratch / ("vds-" + std::to_string(step) + "-hdf5.h5");
    write_vds_file(hdf5, two_rank_manifest(step, 40), nullptr);
    EXPECT_TRUE(read_all(ours) == read_all(hdf5)) << step;
    EXPECT_EQ(file_step(ours), step);
  }
  expect_no_times(scratch / "vds-400.h5");
  // Another plan (more tensors): not patched, learned again.
  EXPECT_FALSE(write_vds_file(scratch / "more.h5", two_rank_manifest(500, 41), &reuse));
  write_vds_file(scratch / "more-hdf5.h5", two_rank_manifest(500, 41), nullptr);
  EXPECT_TRUE(read_all(scratch / "more.h5") == read_all(scratch / "more-hdf5.h5"));
}

}  // namespace
}  // namespace tenax::ckpt
