// The host memory accounting (core/host_memory.hpp): what the node lets a process take, read from /proc and memory
// cgroups (v1 and v2, fake trees here), TENAX_MEMORY_LIMIT's values, and the limit's refusal of host tensors and
// checkpoint staging memory.
#include "core/host_memory.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint/staging.hpp"
#include "tenax/error.hpp"
#include "tenax/tensor.hpp"

namespace tenax::detail {
namespace {

namespace fsys = std::filesystem;

class FakeSystem : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fsys::path(TENAX_UNIT_TEST_TMP) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fsys::remove_all(root_);
    fsys::create_directories(root_ / "proc/self");
    fsys::create_directories(root_ / "cgroup");
  }
  void write(const std::string& relative, const std::string& text) {
    const fsys::path p = root_ / relative;
    fsys::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::optional<AvailableMemory> read() {
    return available_host_memory((root_ / "proc").string(), (root_ / "cgroup").string());
  }
  fsys::path root_;
};

TEST_F(FakeSystem, MemAvailableWithoutAnyCgroupLimit) {
  write("proc/meminfo", "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2000000 kB\n");
  write("proc/self/cgroup", "0::/user.slice\n");
  write("cgroup/user.slice/memory.max", "max\n");
  write("cgroup/user.slice/memory.current", "5000\n");
  const std::optional<AvailableMemory> a = read();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->bytes, 2000000ull * 1024);
  EXPECT_EQ(a->source, "MemAvailable");
}

TEST_F(FakeSystem, ACgroupV2LimitAboveTheProcesssGroupLeavesLessRoomAndItsPageCacheCountsAsFree) {
  write("proc/meminfo", "MemAvailable:   100000000 kB\n");
  // A Slurm job's limit sits on the job's group; the step's group below it has none.
  write("proc/self/cgroup", "0::/system.slice/slurmstepd.scope/job_7/step_0\n");
  write("cgroup/system.slice/slurmstepd.scope/job_7/memory.max", "8589934592\n");  // 8 GiB
  write("cgroup/system.slice/slurmstepd.scope/job_7/memory.current", "3221225472\n");
  // 2 GiB of page cache, of which 512 MiB tmpfs (a node-local checkpoint tier in /dev/shm): not reclaimable.
  write("cgroup/system.slice/slurmstepd.scope/job_7/memory.stat",
        "anon 1073741824\nfile 2147483648\nfile_mapped 1\nshmem 536870912\n");
  write("cgroup/system.slice/slurmstepd.scope/job_7/step_0/memory.max", "max\n");
  write("cgroup/system.slice/slurmstepd.scope/job_7/step_0/memory.current", "3221225472\n");
  const std::optional<AvailableMemory> a = read();
  ASSERT_TRUE(a);
  // 8 GiB minus the 1.5 GiB held apart from the 1.5 GiB of reclaimable page cache.
  EXPECT_EQ(a->bytes, (13ull << 30) / 2);
  EXPECT_EQ(a->source, "memory cgroup /system.slice/slurmstepd.scope/job_7 (limit 8.0 GiB)");
}

TEST_F(FakeSystem, ACgroupV1MemoryLimitAndItsUnlimitedValue) {
  write("proc/meminfo", "MemAvailable:   100000000 kB\n");
  write("proc/self/cgroup", "5:cpu,cpuacct:/x\n4:memory:/slurm/uid_0/job_9\n0::/\n");
  write("cgroup/memory/slurm/uid_0/job_9/memory.limit_in_bytes", "4294967296\n");
  write("cgroup/memory/slurm/uid_0/job_9/memory.usage_in_bytes", "1073741824\n");
  write("cgroup/memory/slurm/uid_0/job_9/memory.stat", "cache 5\ntotal_cache 536870912\n");
  write("cgroup/memory/slurm/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "no limit"
  write("cgroup/memory/slurm/memory.usage_in_bytes", "1073741824\n");
  const std::optional<AvailableMemory> a = read();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->bytes, (4ull << 30) - (512ull << 20));
  EXPECT_EQ(a->source, "memory cgroup /slurm/uid_0/job_9 (limit 4.0 GiB)");
}

TEST_F(FakeSystem, DamagedOrMissingFilesAreSkippedNotTrusted) {
  write("proc/meminfo", "MemAvailableX: 5 kB\nMemAvailable:   abc kB\n");
  write("proc/self/cgroup", "garbage\n0::relative/path\n0::/../escape\n0::/a\n");
  write("cgroup/a/memory.max", "-5\n");
  write("cgroup/a/memory.current", "1\n");
  EXPECT_FALSE(read());
  write("proc/meminfo", "MemAvailable:   99999999999999999999999 kB\n");  // more than 64 bits
  EXPECT_FALSE(read());
  write("proc/meminfo", "MemAvailable:   1000 kB\n");
  write("cgroup/a/memory.max", "1000\n");
  write("cgroup/a/memory.current", "5000\n");  // over its limit: no room, not a wrapped-around huge one
  const std::optional<AvailableMemory> a = read();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->bytes, 0u);
}

TEST(MemoryLimitSetting, SizesWithBinaryUnitsAutoAndOff) {
  EXPECT_EQ(parse_memory_limit("X", "auto").kind, MemoryLimitSetting::Kind::Auto);
  EXPECT_EQ(parse_memory_limit("X", "off").kind, MemoryLimitSetting::Kind::Off);
  EXPECT_EQ(parse_memory_limit("X", "16G").bytes, 16ull << 30);
  EXPECT_EQ(parse_memory_limit("X", "512M").bytes, 512ull << 20);
  EXPECT_EQ(parse_memory_limit("X", "64k").bytes, 64ull << 10);
  EXPECT_EQ(parse_memory_limit("X", "1.5T").bytes, 3ull << 39);
  EXPECT_EQ(parse_memory_limit("X", "2GiB").bytes, 2ull << 30);
  EXPECT_EQ(parse_memory_limit("X", "2GB").bytes, 2ull << 30);
  for (const char* bad : {"", "16", "G", "-1G", "0G", "1..5G", ".5G", "5.G", "16Q", "16GiBs", "1e3G", " 16G", "9E",
                          "99999999999T", "nan", "AUTO"}) {
    try {
      parse_memory_limit("TENAX_MEMORY_LIMIT", bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("TENAX_MEMORY_LIMIT must be auto, off or a size"), std::string::npos)
          << e.what();
    }
  }
}

TEST(FormatBytes, PicksTheLargestUnitBelowTheValue) {
  EXPECT_EQ(format_bytes(512), "512 bytes");
  EXPECT_EQ(format_bytes(4096), "4.0 KiB");
  EXPECT_EQ(format_bytes(3ull << 29), "1.5 GiB");
  EXPECT_EQ(format_bytes(~0ull), "16.0 EiB");
}

TEST(HostMemoryLimit, RefusesATensorOverItChargingNothingAndCountsReleases) {
  const std::uint64_t before = charged_host_memory();
  {
    const Tensor kept = Tensor::zeros({1000}, DType::F32);  // 4000 bytes, rounded to 64
    EXPECT_EQ(charged_host_memory(), before + 4032);
    const HostMemoryLimit limit(before + 8192, [](std::uint64_t charged, std::uint64_t asked, std::uint64_t most) {
      return "over: " + std::to_string(charged) + "+" + std::to_string(asked) + ">" + std::to_string(most);
    });
    try {
      (void)Tensor::zeros({2000}, DType::F32);
      ADD_FAILURE() << "8000 bytes more were allowed";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()),
                "over: " + std::to_string(before + 4032) + "+8000>" + std::to_string(before + 8192));
    }
    EXPECT_EQ(charged_host_memory(), before + 4032);  // the refused tensor is not counted
    const Tensor fits = Tensor::zeros({1000}, DType::F32);
    EXPECT_EQ(charged_host_memory(), before + 8064);
    EXPECT_THROW(HostMemoryLimit(1, nullptr), std::logic_error);  // one at a time
  }
  EXPECT_EQ(charged_host_memory(), before);
  const Tensor unlimited = Tensor::zeros({1 << 20}, DType::F32);  // no limit in force any more
  EXPECT_EQ(charged_host_memory(), before + (4u << 20));
}

TEST(HostMemoryLimit, ASharedTotalIsWhatTheLimitAppliesToAndTakesBackOnlyWhatThisProcessAdded) {
  std::uint64_t node_total = 900;                               // what other processes of the node added
  Tensor before_the_limit = Tensor::zeros({2048}, DType::F32);  // 8 KiB, charged before any limit
  {
    const HostMemoryLimit limit(900 + 4096, nullptr, &node_total);
    const Tensor a = Tensor::zeros({512}, DType::F32);  // 2048 bytes
    EXPECT_EQ(node_total, 900u + 2048);
    EXPECT_THROW(Tensor::zeros({1024}, DType::F32), UsageError);  // 4096 more: over the node's total
    EXPECT_EQ(node_total, 900u + 2048);
    {
      const Tensor b = Tensor::zeros({256}, DType::F32);
      EXPECT_EQ(node_total, 900u + 3072);
    }
    EXPECT_EQ(node_total, 900u + 2048);
    // The 8 KiB never reached the shared total: releasing them takes back at most this process's 2048 bytes, not
    // the other processes' 900 (nor wraps the total around).
    before_the_limit = Tensor();
    EXPECT_EQ(node_total, 900u);
  }
  EXPECT_EQ(node_total, 900u);
}

TEST(HostMemoryLimit, ChecksCheckpointStagingMemoryToo) {
  const std::uint64_t before = charged_host_memory();
  {
    ckpt::StagingArena arena;
    arena.allocate(100000, false);
    EXPECT_GE(charged_host_memory(), before + 100000);
  }
  EXPECT_EQ(charged_host_memory(), before);
  const HostMemoryLimit limit(before + 65536, nullptr);
  ckpt::StagingArena arena;
  try {
    arena.allocate(1 << 20, false);
    ADD_FAILURE() << "1 MiB of staging memory was allowed over a 64 KiB limit";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("over the limit of"), std::string::npos) << e.what();
  }
  EXPECT_EQ(charged_host_memory(), before);
}

}  // namespace
}  // namespace tenax::detail
