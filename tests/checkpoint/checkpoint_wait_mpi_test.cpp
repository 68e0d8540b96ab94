// Ranks waiting for a slow checkpoint writer must not be ended by the communication watchdog. Run with
// TENAX_COMM_TIMEOUT=1s on 2 ranks: rank 1's I/O thread is held for 3 s (past the timeout) while rank 0, whose write
// finished at once, waits for it. Waiting inside one blocking all-reduce, rank 0 would be ended with exit 76 by the
// watchdog; waiting in rounds of short all-reduces, both ranks commit the checkpoint.
//
// How rank 1's writer is held without any hook in the library: serial HDF5 is built thread-safe, with one global lock
// that every API call holds. A helper thread calls H5Fopen on a FIFO, which blocks inside open(2) until a writer
// appears - holding that lock - so rank 1's I/O thread blocks at its first HDF5 call. A third thread opens the FIFO
// for writing 3 s later, which ends the H5Fopen (it fails: the FIFO holds no HDF5 file) and frees the lock.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/mpi_test.hpp"
#include "tenax/checkpoint.hpp"
#include "tenax/env.hpp"
#include "test_dirs.hpp"

namespace tenax::test {
namespace {

// The thread's current system call from /proc (its number, or -1 while running): "blocked in openat" is the event the
// test waits for, instead of sleeping and hoping the helper thread got there.
long current_syscall(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/syscall");
  std::string first;
  in >> first;
  if (first.empty() || first == "running") return -1;
  return std::stol(first);
}

TEST(CheckpointWait, WaitingForASlowWriterDoesNotTripTheWatchdog) {
  Communicator& world = tenax::test::world();
  ASSERT_EQ(world.size(), 2) << "run on 2 ranks";
  ASSERT_EQ(env::get_duration("TENAX_COMM_TIMEOUT"), std::chrono::seconds(1)) << "run with TENAX_COMM_TIMEOUT=1s";
  SharedTempDir dir(world, "wait");
  std::vector<float> data(1 << 16, 1.0f);
  CheckpointOptions options;
  options.dir = dir.path();
  Checkpointer ckpt(world, options, {TensorShard::whole("w", DType::F32, {data.size()}, data.data())});

  std::thread holder, releaser;
  const std::string fifo = dir / "fifo";
  if (world.rank() == 1) {
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::atomic<pid_t> holder_tid{0};
    holder = std::thread([&] {
      holder_tid = ::gettid();
      H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
      hid_t f = H5Fopen(fifo.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);  // blocks in open(2) holding HDF5's lock
      if (f >= 0) H5Fclose(f);
      // A failed open leaves messages on this thread's HDF5 error stack; a thread that ends without clearing it
      // leaks them (the library's own threads clear theirs the same way, hdf5_util.cpp).
      H5Eclear2(H5E_DEFAULT);
    });
    while (holder_tid == 0 || current_syscall(holder_tid) != SYS_openat)
      std::this_thread::yield();
    releaser = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::seconds(3));  // the length of the stall is the point of the test
      const int fd = ::open(fifo.c_str(), O_WRONLY);
      if (fd >= 0) ::close(fd);
    });
  }
  const auto start = std::chrono::steady_clock::now();
  ckpt.save(1);
  ckpt.wait();  // rank 0 waits here for rank 1's held write
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (world.rank() == 1) {
    releaser.join();
    holder.join();
  }
  EXPECT_GE(waited, 2.5) << "rank 1's writer was not held: the test did not test anything";
  EXPECT_EQ(ckpt.last_committed_step(), std::optional<std::uint64_t>(1));
  if (world.rank() == 0) std::printf("waited %.1f s with a 1 s communication timeout\n", waited);
}

}  // namespace
}  // namespace tenax::test
