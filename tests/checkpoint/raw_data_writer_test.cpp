// RawDataWriter on the real file system: bytes land where asked whether they go direct (whole aligned pages), through
// the page cache (unaligned offsets or buffers, partial last pages) or all buffered when direct I/O is off.
#include "checkpoint/raw_data_writer.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "tenax/error.hpp"

namespace tenax::ckpt {
namespace {

struct Scratch {
  std::filesystem::path dir;
  Scratch() {
    char tmpl[] = "/tmp/tenax-rawwriter-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~Scratch() { std::filesystem::remove_all(dir); }
  std::string empty_file(const std::string& name) const {
    std::ofstream(dir / name).flush();
    return (dir / name).string();
  }
};

std::vector<std::uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool direct_io_supported(const std::string& dir) {
  const std::string probe = dir + "/probe";
  std::ofstream(probe).flush();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_DIRECT);
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}

class RawDataWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A page-aligned source, like the staging buffer.
    void* p = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    source_ = static_cast<std::uint8_t*>(p);
    std::mt19937 rng(7);
    for (std::size_t i = 0; i < kBytes; ++i)
      source_[i] = static_cast<std::uint8_t>(rng());
  }
  void TearDown() override { ::munmap(source_, kBytes); }

  static constexpr std::size_t kBytes = 3 * 4096 + 100 + 8192;
  std::uint8_t* source_ = nullptr;
  Scratch scratch_;
};

TEST_F(RawDataWriterTest, AlignedPagesGoDirectAndEveryByteLandsWhereAsked) {
  const std::string path = scratch_.empty_file("a");
  RawDataWriter w(path, /*direct=*/true);
  w.write(4096, source_, 3 * 4096 + 100);          // aligned: 3 pages direct, 100 bytes buffered
  w.write(20000, source_ + 3 * 4096 + 100, 8192);  // unaligned offset and buffer: all buffered
  w.sync_and_close();
  if (direct_io_supported(scratch_.dir.string())) {
    EXPECT_TRUE(w.direct());
    EXPECT_EQ(w.direct_bytes(), 3u * 4096);
  }
  const auto file = read_all(path);
  ASSERT_EQ(file.size(), 20000u + 8192);
  EXPECT_EQ(std::memcmp(file.data() + 4096, source_, 3 * 4096 + 100), 0);
  EXPECT_EQ(std::memcmp(file.data() + 20000, source_ + 3 * 4096 + 100, 8192), 0);
  for (std::size_t i = 0; i < 4096; ++i)
    ASSERT_EQ(file[i], 0) << "byte " << i << " was never written: a hole reads as zero";
}

TEST_F(RawDataWriterTest, WithoutDirectIoEverythingIsBuffered) {
  const std::string path = scratch_.empty_file("b");
  RawDataWriter w(path, /*direct=*/false);
  w.write(0, source_, kBytes);
  w.sync_and_close();
  EXPECT_FALSE(w.direct());
  EXPECT_EQ(w.direct_bytes(), 0u);
  const auto file = read_all(path);
  ASSERT_EQ(file.size(), kBytes);
  EXPECT_EQ(std::memcmp(file.data(), source_, kBytes), 0);
}

TEST_F(RawDataWriterTest, AMissingFileIsAnIoErrorNamingIt) {
  try {
    RawDataWriter w((scratch_.dir / "missing/file").string(), true);
    ADD_FAILURE() << "opened a file in a missing directory";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("missing/file: No such file or directory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tenax::ckpt
