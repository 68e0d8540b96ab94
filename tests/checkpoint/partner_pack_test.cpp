// A node-local step packed for its partner and committed there (checkpoint/local_tier.hpp, pack_step / unpack_step):
// the files come back byte for byte, a buffer packed into again holds exactly the new step, and a damaged, truncated
// or foreign pack is refused by name without leaving a step behind.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "checkpoint/local_tier.hpp"
#include "tenax/error.hpp"

namespace {

namespace fsys = std::filesystem;
using tenax::ckpt::PackedStep;

class PartnerPack : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/tenax-partner-pack-XXXXXX";
    ASSERT_NE(::mkdtemp(templ), nullptr);
    root_ = templ;
  }
  void TearDown() override { fsys::remove_all(root_); }

  // A step directory with a manifest and a rank file of `bytes` random bytes.
  std::string make_step(const std::string& name, std::size_t bytes, unsigned seed) {
    const fsys::path dir = root_ / name;
    fsys::create_directories(dir);
    write(dir / "manifest.json", std::string("{\"step\": ") + std::to_string(seed) + "}");
    std::string data(bytes, '\0');
    std::mt19937 random(seed);
    for (char& c : data)
      c = static_cast<char>(random());
    write(dir / "rank_00000.h5", data);
    return dir.string();
  }
  static void write(const fsys::path& path, const std::string& data) { std::ofstream(path, std::ios::binary) << data; }
  static std::string read(const fsys::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  fsys::path root_;
};

TEST_F(PartnerPack, TheFilesComeBackByteForByte) {
  const std::string step = make_step("step_5", 300000, 1);
  const PackedStep packed = tenax::ckpt::pack_step(step);
  const std::string partner = (root_ / "partner").string();
  tenax::ckpt::unpack_step(partner, 5, packed, 2);
  for (const char* name : {"manifest.json", "rank_00000.h5"})
    EXPECT_EQ(read(fsys::path(partner) / "step_5" / name), read(fsys::path(step) / name)) << name;
}

TEST_F(PartnerPack, ABufferPackedIntoAgainHoldsExactlyTheNewStep) {
  PackedStep buffer;
  tenax::ckpt::pack_step(make_step("big", 500000, 2), buffer);
  const std::string small = make_step("small", 1000, 3);
  tenax::ckpt::pack_step(small, buffer);  // smaller than what the buffer held: nothing of the old pack may remain
  EXPECT_EQ(buffer, tenax::ckpt::pack_step(small));
  const std::string partner = (root_ / "partner").string();
  tenax::ckpt::unpack_step(partner, 9, buffer, 2);
  EXPECT_EQ(read(fsys::path(partner) / "step_9" / "rank_00000.h5"), read(fsys::path(small) / "rank_00000.h5"));
}

TEST_F(PartnerPack, DamagedTruncatedOrForeignPacksAreRefusedAndLeaveNoStep) {
  const PackedStep good = tenax::ckpt::pack_step(make_step("step_3", 4096, 4));
  const std::string partner = (root_ / "partner").string();
  auto refused = [&](const PackedStep& packed, const std::string& says) {
    try {
      tenax::ckpt::unpack_step(partner, 3, packed, 2);
      ADD_FAILURE() << "accepted; expected: " << says;
    } catch (const tenax::IoError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fsys::exists(fsys::path(partner) / "step_3")) << says;
  };
  PackedStep flipped = good;
  flipped[flipped.size() / 2] ^= 0x01;
  refused(flipped, "CRC32C mismatch");
  PackedStep cut(good.begin(), good.begin() + 8);
  refused(cut, "truncated");
  // A well-formed pack of a directory holding a file no step holds.
  const std::string odd = make_step("odd", 100, 5);
  write(fsys::path(odd) / "notes.txt", "not a checkpoint file");
  refused(tenax::ckpt::pack_step(odd), "unexpected file");
}

TEST_F(PartnerPack, AStepWithoutItsManifestIsNotPacked) {
  PackedStep buffer;
  const std::string missing = (root_ / "nothing-here").string();
  EXPECT_THROW(tenax::ckpt::pack_step(missing, buffer), tenax::IoError);
  const std::string incomplete = make_step("step_4", 100, 6);
  fsys::remove(fsys::path(incomplete) / "manifest.json");
  try {
    tenax::ckpt::pack_step(incomplete, buffer);
    ADD_FAILURE() << "a step without its manifest was packed";
  } catch (const tenax::IoError& e) {
    EXPECT_NE(std::string(e.what()).find("has no manifest.json"), std::string::npos) << e.what();
  }
}

}  // namespace
