#include "checkpoint/staging_pass.hpp"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>

#include "checkpoint/crc32c.hpp"

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

StagingPass::StagingPass(int threads) {
  for (int i = 1; i < threads; ++i) {
    helpers_.emplace_back([this] { helper_loop(); });
    // Named here rather than by the thread itself, so the name is there once the constructor returns.
    pthread_setname_np(helpers_.back().native_handle(), "tenax-ckpt-stg");
  }
}

StagingPass::~StagingPass() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : helpers_)
    t.join();
}

void StagingPass::run(const std::vector<StagingCopy>& copies) {
  std::size_t total = 0;
  for (const StagingCopy& c : copies)
    total += c.bytes;
  if (helpers_.empty() || total < kParallelBytes) {
    for (const StagingCopy& c : copies)
      *c.crc = crc32c_copy(c.dst, c.src, c.bytes, 0);
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
    piece_crcs_[p] = crc32c_copy(c.dst + piece.offset, c.src + piece.offset, piece.bytes, 0);
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

int automatic_staging_threads(int ranks_on_this_host) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  int allowed = ::sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : static_cast<int>(online);
  if (allowed < 1) allowed = 1;
  // Bound ranks (srun --cpu-bind, mpirun --bind-to) each see only their own CPUs; unbound ones all see every CPU and
  // share them.
  const bool unbound = online > 0 && allowed >= online;
  const int share = unbound ? allowed / std::max(1, ranks_on_this_host) : allowed;
  return std::clamp(share, 1, kMaxAutomaticThreads);
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "localhost";
  return host;
}

}  // namespace tenax::ckpt
