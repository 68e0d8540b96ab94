#include "checkpoint/staging_pass.hpp"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <system_error>

#include "checkpoint/crc32c.hpp"
#include "core/host_name.hpp"
#include "tenax/error.hpp"

namespace tenax::ckpt {
namespace {

// Big enough that taking a piece and joining its CRC are negligible next to copying it (a join is ~1 µs, a 4 MiB copy
// ~0.5 ms), small enough that threads finish together when one of them is slowed (a busy VM host, a page fault).
// A multiple of 4 KiB keeps every piece's destination as aligned as the copy's (the wide-store paths need 32/64).
constexpr std::size_t kPieceBytes = std::size_t{4} << 20;
// Below this much in one save the helpers' wake-up costs more than they save.
constexpr std::size_t kParallelBytes = 2 * kPieceBytes;
constexpr int kMaxAutomaticThreads = 8;

}  // namespace

StagingPass::StagingPass(int threads, const Crc32cCopyKernel& kernel) : kernel_(kernel) {
  helpers_.reserve(threads > 1 ? threads - 1 : 0);
  try {
    for (int i = 1; i < threads; ++i) {
      helpers_.emplace_back([this] { helper_loop(); });
      // Named here rather than by the thread itself, so the name is there once the constructor returns.
      pthread_setname_np(helpers_.back().native_handle(), "tenax-ckpt-stg");
    }
  } catch (const std::system_error& e) {  // no thread to be had (ulimit -u, a cgroup's pids.max): stop those started
    stop_helpers();
    throw IoError("checkpoint: cannot start " + std::to_string(threads - 1) + " staging threads (" + e.what() +
                  "); lower TENAX_CKPT_STAGING_THREADS or raise the limit on processes");
  }
}

void StagingPass::stop_helpers() noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : helpers_)
    t.join();
  helpers_.clear();
}

StagingPass::~StagingPass() {
  stop_helpers();
}

void StagingPass::run(const std::vector<StagingCopy>& copies) {
  std::size_t total = 0;
  for (const StagingCopy& c : copies)
    total += c.bytes;
  if (helpers_.empty() || total < kParallelBytes) {
    for (const StagingCopy& c : copies)
      *c.crc = kernel_.copy(c.dst, c.src, c.bytes, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    copies_ = &copies;
    pieces_.clear();
    for (std::size_t i = 0; i < copies.size(); ++i) {
      if (copies[i].bytes == 0) pieces_.push_back(Piece{i, 0, 0});
      for (std::size_t at = 0; at < copies[i].bytes; at += kPieceBytes)
        pieces_.push_back(Piece{i, at, std::min(kPieceBytes, copies[i].bytes - at)});
    }
    piece_crcs_.assign(pieces_.size(), 0);
    next_piece_ = 0;
    busy_ = static_cast<int>(helpers_.size());
    ++round_;
  }
  wake_.notify_all();
  take_pieces();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return busy_ == 0; });
    copies_ = nullptr;
  }
  // Pieces are in copy order, each copy's in offset order.
  for (std::size_t p = 0; p < pieces_.size();) {
    const std::size_t copy = pieces_[p].copy;
    std::uint32_t crc = piece_crcs_[p];
    for (++p; p < pieces_.size() && pieces_[p].copy == copy; ++p)
      crc = crc32c_combine(crc, piece_crcs_[p], pieces_[p].bytes);
    *copies[copy].crc = crc;
  }
}

void StagingPass::take_pieces() {
  while (true) {
    std::size_t p;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (next_piece_ == pieces_.size()) return;
      p = next_piece_++;
    }
    const Piece& piece = pieces_[p];
    const StagingCopy& c = (*copies_)[piece.copy];
    piece_crcs_[p] = kernel_.copy(c.dst + piece.offset, c.src + piece.offset, piece.bytes, 0);
  }
}

void StagingPass::helper_loop() {
  std::uint64_t seen = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || round_ != seen; });
      if (stop_) return;
      seen = round_;
    }
    take_pieces();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --busy_;
    }
    done_.notify_one();
  }
}

std::string cpu_placement() {
  const std::string host = detail::host_name();
  std::string mask;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) {
        mask.resize(cpu + 1, '0');
        mask[cpu] = '1';
      }
  }
  if (mask.empty()) mask = "1";  // unknown: one CPU
  return std::string(host) + " " + mask;
}

int automatic_staging_threads(const std::vector<std::string>& placements, int rank) {
  auto split = [](const std::string& p) {
    const std::size_t space = p.rfind(' ');
    return space == std::string::npos ? std::pair<std::string, std::string>{p, "1"}
                                      : std::pair<std::string, std::string>{p.substr(0, space), p.substr(space + 1)};
  };
  const auto [host, mask] = split(placements.at(rank));
  const int cpus = static_cast<int>(std::count(mask.begin(), mask.end(), '1'));
  int sharing = 0;  // ranks of this host whose CPUs overlap this rank's, itself included
  for (const std::string& p : placements) {
    const auto [other_host, other_mask] = split(p);
    if (other_host != host) continue;
    bool overlap = false;
    for (std::size_t cpu = 0; cpu < std::min(mask.size(), other_mask.size()) && !overlap; ++cpu)
      overlap = mask[cpu] == '1' && other_mask[cpu] == '1';
    sharing += overlap ? 1 : 0;
  }
  return std::clamp(cpus / std::max(1, sharing), 1, kMaxAutomaticThreads);
}

}  // namespace tenax::ckpt
