// The node-local tier's saves: queueing a copy on the tier's own I/O thread, the job that writes it (and packs it for
// the partner), and the staging memory of its own that lets a copy go ahead while a shared write still reads `arena`.
#include <string>
#include <vector>

#include "checkpoint/checkpointer_state.hpp"
#include "checkpoint/crc32c.hpp"
#include "checkpoint/local_tier.hpp"
#include "comm/agreement.hpp"
#include "tenax/log.hpp"

namespace tenax {

void Checkpointer::State::submit_local(std::uint64_t step, const std::uint8_t* staged, const Blobs& blobs) {
  local_blobs = blobs;
  local_writing = step;
  local_done = local_io->submit([this, step, staged] { return local_job(step, staged); });
  local_unconfirmed = step;
  if (partner_to >= 0) partner = PartnerExchange{step};
}

Checkpointer::State::LocalResult Checkpointer::State::local_job(std::uint64_t step, const std::uint8_t* staged_at) {
  LocalResult result;
  try {
    if (local_fence) {
      ckpt::use_device(cuda_device);
      local_fence->wait();
    }
    std::vector<ckpt::LocalShard> copies;
    for (std::size_t i = 0; i < local_shards.size(); ++i) {
      const std::uint8_t* staged = staged_at + local_offsets[i];
      const TensorShard& t = local_shards[i];
      const std::uint32_t crc =
          t.memory == MemoryKind::Device ? ckpt::crc32c_extend(0, staged, t.bytes()) : local_crcs[i];
      copies.push_back(ckpt::LocalShard{&t, staged, crc});
    }
    ckpt::write_local_copy(local_root, step, rank, world_size, options.layout, copies, local_blobs, options.local_keep,
                           options.direct_io, &local_file_template);
    if (partner_to >= 0) {
      result.packed = std::move(spare_pack);  // the previous exchange's buffer (store_partner handed it back)
      ckpt::pack_step(ckpt::local_step_dir(local_root, step), result.packed);
    }
  } catch (const std::exception& e) {
    result.packed.clear();  // an empty copy tells the partner this rank's local write failed
    result.failure = e.what();
  }
  return result;
}

bool Checkpointer::State::local_arena_ready() {
  if (local_arena_state == LocalArena::Untried) {
    // Allocated at the first node-local save that overlaps a shared write, not at construction: a run whose shared
    // writes keep up never needs it. Agreed, so that every rank stages alike; refused once, never tried again.
    std::string failure;
    try {
      local_arena.allocate(local_staging_bytes, any_device);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    const bool ok = every_rank(world, failure.empty());
    local_arena_state = ok ? LocalArena::Ready : LocalArena::Refused;
    if (ok) {
      TENAX_LOG(Info, "ckpt") << "node-local copies are staged apart while a shared write is in flight: "
                              << local_staging_bytes << " more staging bytes on this rank";
    } else {
      TENAX_LOG(Warn, "ckpt") << "no staging memory of their own for node-local copies"
                              << (failure.empty() ? " on another rank" : " (" + failure + ")")
                              << ": a node-local save waits for the shared write in flight instead";
    }
  }
  return local_arena_state == LocalArena::Ready;
}

}  // namespace tenax
