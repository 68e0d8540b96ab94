// The blocking part of Checkpointer::save(): every host shard copied into staging memory with its CRC32C, spread over
// a few threads.
//
// While it runs the training thread waits, so the cores it and its math library use are free: one thread alone leaves
// most of a node's memory bandwidth unused (on a 2-core VM one core copies at about half the rate two do). Large
// copies are cut into pieces that threads take in turn; each piece's CRC is computed with its copy (a crc32c_copy
// kernel) and the pieces' CRCs are joined in order with crc32c_combine, so the result is bit-for-bit the
// single-threaded one.
//
// Who calls what: the Checkpointer constructs one (threads - 1 helpers start and park), its training thread calls
// run() for each save; run() returns when every copy is done. Not for concurrent use by several threads.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/crc32c.hpp"

namespace tenax::ckpt {

struct StagingCopy {
  std::uint8_t* dst = nullptr;  // staging memory (4 KiB-aligned in the checkpointer's arena)
  const std::uint8_t* src = nullptr;
  std::size_t bytes = 0;
  std::uint32_t* crc = nullptr;  // receives crc32c_extend(0, src, bytes)
};

class StagingPass {
 public:
  // threads >= 1: the caller of run() and threads - 1 helpers. IoError when the helpers cannot be started. kernel: one
  // of crc32c_copy_kernels() (a destination it cannot take goes to crc32c_copy's choice); the pass keeps a copy.
  StagingPass(int threads, const Crc32cCopyKernel& kernel);
  ~StagingPass();
  StagingPass(const StagingPass&) = delete;
  StagingPass& operator=(const StagingPass&) = delete;

  int threads() const { return static_cast<int>(helpers_.size()) + 1; }
  const Crc32cCopyKernel& kernel() const { return kernel_; }
  void run(const std::vector<StagingCopy>& copies);

 private:
  struct Piece {
    std::size_t copy = 0;
    std::size_t offset = 0;
    std::size_t bytes = 0;
  };
  void helper_loop();
  void stop_helpers() noexcept;
  void take_pieces();

  const Crc32cCopyKernel kernel_;
  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable wake_;  // helpers: a new round (or stop)
  std::condition_variable done_;  // run(): every helper left the round
  std::uint64_t round_ = 0;
  int busy_ = 0;
  bool stop_ = false;
  // The round's work, written by run() before it wakes the helpers and read-only until they are all done.
  const std::vector<StagingCopy>* copies_ = nullptr;
  std::vector<Piece> pieces_;
  std::vector<std::uint32_t> piece_crcs_;
  std::size_t next_piece_ = 0;  // under mutex_
};

// Where this process may run: its host (the kernel's host name; unlike the node-local tier's node name, never Slurm's)
// and its CPU affinity mask ('1' per allowed CPU, in CPU order), as a string every rank can gather.
std::string cpu_placement();
// How many threads the staging pass of a rank uses when CheckpointOptions::staging_threads is 0, from every rank's
// cpu_placement(): this rank's allowed CPUs shared among the ranks of its host whose masks overlap its own (all of
// them when ranks are not bound; none but itself when each is bound to CPUs of its own; those of its socket when bound
// per socket), at most 8 (memory bandwidth, not cores, bounds a copy), at least 1.
int automatic_staging_threads(const std::vector<std::string>& placements, int rank);

}  // namespace tenax::ckpt
