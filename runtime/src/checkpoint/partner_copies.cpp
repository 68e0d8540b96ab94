// Partner copies of the node-local tier: sending each rank's committed copy to a rank of the next node while training
// goes on, and fetching a replaced node's copies back from their partners at a restart.
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "checkpoint/checkpointer_state.hpp"
#include "checkpoint/local_tier.hpp"
#include "checkpoint/local_tier_cleanup.hpp"
#include "checkpoint/manifest.hpp"
#include "core/file_system.hpp"
#include "tenax/log.hpp"

namespace tenax {
namespace {

// MPI's counts are ints: transfers of at most 1 GiB each.
constexpr std::size_t kChunk = std::size_t{1} << 30;

void add_transfers(std::vector<PeerTransfer>& transfers, bool send, int peer, std::uint8_t* data, std::size_t bytes) {
  for (std::size_t at = 0; at < bytes; at += kChunk)
    transfers.push_back(PeerTransfer{send, peer, data + at, std::min(kChunk, bytes - at)});
}

// Waits, in the short rounds of wait_on_every_rank, until `work` is complete on every rank.
void wait_for_transfers(Communicator& world, Work& work) {
  wait_on_every_rank(world, [&work](std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!work.is_completed()) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
  });
}

// Exchanges one u64 with each peer (sizes before payloads). Small: waited for at once.
std::vector<std::uint64_t> exchange_sizes(Communicator& world, const std::vector<int>& send_to,
                                          std::vector<std::uint64_t> sizes, const std::vector<int>& receive_from) {
  std::vector<std::uint64_t> received(receive_from.size(), 0);
  std::vector<PeerTransfer> transfers;
  for (std::size_t i = 0; i < send_to.size(); ++i)
    transfers.push_back(PeerTransfer{true, send_to[i], &sizes[i], 1});
  for (std::size_t i = 0; i < receive_from.size(); ++i)
    transfers.push_back(PeerTransfer{false, receive_from[i], &received[i], 1});
  Work work = world.exchange(transfers, DType::I64);
  work.wait();
  return received;
}

}  // namespace

void Checkpointer::State::start_partner() {
  PartnerExchange& x = *partner;
  x.out_size = x.out.size();
  x.in_sizes = exchange_sizes(world, {partner_to}, {x.out_size}, partner_from);
  std::vector<PeerTransfer> transfers;
  add_transfers(transfers, true, partner_to, x.out.data(), x.out.size());
  x.in.resize(partner_from.size());
  for (std::size_t i = 0; i < partner_from.size(); ++i) {
    x.in[i].resize(x.in_sizes[i]);
    add_transfers(transfers, false, partner_from[i], x.in[i].data(), x.in[i].size());
  }
  x.work = world.exchange(transfers, DType::U8);
  x.started = true;
}

void Checkpointer::State::store_partner() {
  // Stored on the node-local I/O thread; a failure there is a warning (the owner's own copy and the shared tier are
  // unaffected).
  for (std::size_t i = 0; i < partner_from.size(); ++i) {
    if (partner->in[i].empty()) continue;  // the sender's local write had failed
    auto packed = std::make_shared<ckpt::PackedStep>(std::move(partner->in[i]));
    const std::string root = ckpt::partner_root(local_base, local_key, partner_from[i]);
    const std::uint64_t step = partner->step;
    const int from = partner_from[i];
    const int keep = options.local_keep;
    local_io->submit([packed, root, step, from, keep] {
      try {
        ckpt::unpack_step(root, step, *packed, keep);
      } catch (const std::exception& e) {
        TENAX_LOG(Warn, "ckpt") << "could not keep rank " << from << "'s partner copy of step " << step << ": "
                                << e.what();
      }
    });
  }
  spare_pack = std::move(partner->out);
  partner.reset();
}

void Checkpointer::State::finish_partner() {
  if (!partner) return;
  // confirm_local(), which runs just before, has seen every rank's write of this step done.
  if (!partner->started) start_partner();
  wait_for_transfers(world, partner->work);
  store_partner();
}

Outcome Checkpointer::State::fetch_from_partners(std::uint64_t step, const std::vector<int>& holder) {
  Outcome local;
  std::vector<int> send_to;
  std::vector<ckpt::PackedStep> out;
  for (int r = 0; r < world_size; ++r)
    if (holder[r] == rank) {
      send_to.push_back(r);
      try {
        // The node keeps it as partner, or as the rank's own copy from before the ranks were placed anew.
        std::string dir = ckpt::local_step_dir(ckpt::local_rank_root(local_base, local_key, r), step);
        if (!fs::exists(fs::join(dir, ckpt::kManifestName)))
          dir = ckpt::local_step_dir(ckpt::partner_root(local_base, local_key, r), step);
        out.push_back(ckpt::pack_step(dir));
      } catch (const std::exception& e) {
        out.emplace_back();  // sent as empty: the receiver reports it
        local = Outcome{1, "reading rank " + std::to_string(r) + "'s partner copy: " + e.what()};
      }
    }
  const std::vector<int> receive_from = holder[rank] >= 0 ? std::vector<int>{holder[rank]} : std::vector<int>{};
  std::vector<std::uint64_t> sizes;
  for (const auto& o : out)
    sizes.push_back(o.size());
  const std::vector<std::uint64_t> in_sizes = exchange_sizes(world, send_to, sizes, receive_from);
  ckpt::PackedStep in(in_sizes.empty() ? 0 : in_sizes[0]);
  std::vector<PeerTransfer> transfers;
  for (std::size_t i = 0; i < send_to.size(); ++i)
    add_transfers(transfers, true, send_to[i], out[i].data(), out[i].size());
  if (!receive_from.empty()) add_transfers(transfers, false, receive_from[0], in.data(), in.size());
  Work work = world.exchange(transfers, DType::U8);
  wait_for_transfers(world, work);
  if (!receive_from.empty() && local.code == 0) {
    try {
      if (in.empty()) throw IoError("rank " + std::to_string(receive_from[0]) + " sent no partner copy");
      if (options.read_only) adopt_local_folder();
      ckpt::unpack_step(local_root, step, in, options.local_keep);
      TENAX_LOG(Info, "ckpt") << "rank " << rank << ": step " << step << "'s node-local copy fetched from its partner, "
                              << "rank " << receive_from[0];
    } catch (const std::exception& e) {
      local = Outcome{1, std::string("fetching this rank's partner copy: ") + e.what()};
    }
  }
  return agree(world, local);
}

void Checkpointer::State::hold_local_folder(const std::string& folder) {
  local_in_use.reset(ckpt::hold_local_tier_folder(folder));
  if (local_in_use.get() < 0) {
    // Without the lock that protection is gone, nothing else: a warning, not an error.
    const int error = errno;
    TENAX_LOG(Warn, "ckpt") << "rank " << rank << ": could not mark " << folder << " as in use ("
                            << std::strerror(error)
                            << "): a job ending on this node while this one runs could remove its copies";
  }
}

void Checkpointer::State::adopt_local_folder() {
  if (local_in_use.get() >= 0) return;
  const std::string folder = fs::parent_of(local_root);
  const std::string job = ckpt::local_copies_job();
  const std::string named = ckpt::local_tier_folder_job(folder);
  if (!named.empty() && named != job) return;  // another job's: its end removes the folder, this copy with it
  fs::make_dirs(local_base);
  hold_local_folder(folder);  // may wait for a removal under way, and make the folder again
  // Read again under the lock: the folder may be a new one by now, or another job's writer may have named it.
  const std::string now = ckpt::local_tier_folder_job(folder);
  if (!now.empty() && now != job) {
    local_in_use.reset();
    return;
  }
  if (now.empty() && !job.empty())
    fs::replace_file_atomically(fs::join(folder, ckpt::kLocalTierJobFile), job + "\n", fs::Durability::None);
}

}  // namespace tenax
