// The shared tier's write of one checkpoint: each rank's file written on its I/O thread (write_job), the agreement
// that every rank's file is durable (finish_write), rank 0's commit and its agreement (finish_commit), and the manifest
// the commit writes. docs/checkpoint-format.md, "Saving", has the protocol.
#include <algorithm>
#include <chrono>
#include <sstream>

#include "checkpoint/checkpointer_state.hpp"
#include "checkpoint/commit.hpp"
#include "checkpoint/crc32c.hpp"
#include "checkpoint/names.hpp"
#include "checkpoint/shard_file.hpp"
#include "core/file_system.hpp"
#include "tenax/log.hpp"

namespace tenax {

Checkpointer::State::WriteResult Checkpointer::State::write_job(std::uint64_t step) {
  WriteResult result;
  try {
    const std::string path = fs::join(ckpt::temp_dir_path(options.dir, step), ckpt::rank_file_name(rank));
    fs::make_dirs(ckpt::temp_dir_path(options.dir, step));
    if (fence) {
      ckpt::use_device(cuda_device);
      fence->wait();
    }
    std::vector<ckpt::ShardWrite> shard_writes;
    for (std::size_t i = 0; i < writes.size(); ++i) {
      const LocalWrite& w = writes[i];
      const TensorShard& shard = shards[w.shard];
      const std::uint8_t* staged = arena.data() + w.offset;
      // Device shards arrive by DMA: their checksum is taken here, right after the copy completed.
      std::uint32_t crc = shard.memory == MemoryKind::Device ? ckpt::crc32c_extend(0, staged, w.bytes) : staged_crcs[i];
      result.crcs.push_back(crc);
      shard_writes.push_back(ckpt::ShardWrite{shard.name, plan.blocks[w.block].dataset, shard.dtype, shard.global_shape,
                                              plan.blocks[w.block].box, staged, crc});
    }
    std::vector<ckpt::BlobWrite> blob_writes;
    for (const auto& [name, bytes] : staged_blobs) {
      std::uint32_t crc = ckpt::crc32c_extend(0, bytes.data(), bytes.size());
      blob_writes.push_back(ckpt::BlobWrite{name, &bytes, crc});
      result.blobs.push_back(ckpt::ManifestBlob{rank, name, bytes.size(), crc});
    }
    ckpt::RankFileHeader header{step, rank, world_size, options.layout};
    const ckpt::RankFileWritten written =
        ckpt::write_rank_file(path, header, shard_writes, blob_writes, options.direct_io, &shared_file_template);
    result.file_bytes = written.file_bytes;
    result.direct_bytes = written.direct_bytes;
  } catch (const std::exception& e) {
    result.outcome = Outcome{1, e.what()};
  }
  return result;
}

namespace {

// A job's result, or its exception as a failed outcome: an exception escaping on one rank would leave the others in
// the agreement that follows.
template <class T>
T take(std::future<T>& done, T failed) {
  try {
    return done.get();
  } catch (const std::exception& e) {
    failed.outcome = Outcome{1, e.what()};
    return failed;
  }
}

Outcome take_outcome(std::future<Outcome>& done) {
  try {
    return done.get();
  } catch (const std::exception& e) {
    return Outcome{1, e.what()};
  }
}

}  // namespace

void Checkpointer::State::finish_write() {
  wait_on_every_rank(
      world, [this](std::chrono::milliseconds t) { return write_done.wait_for(t) == std::future_status::ready; });
  WriteResult result = take(write_done, WriteResult{});
  if (result.outcome.code == 0) {
    ++totals.files;
    totals.bytes += result.file_bytes;
    totals.direct_bytes += result.direct_bytes;
  }
  // Rank 0's I/O thread ran the previous checkpoint's commit before this write: its outcome is known by now.
  Outcome previous_commit;
  if (world.rank() == 0 && committing) previous_commit = take_outcome(commit_done);
  const std::uint64_t step = *writing;
  const std::optional<std::uint64_t> previous = committing;
  writing.reset();
  committing.reset();
  // Two separate verdicts: a failed commit of the previous step must not throw away this step's good write.
  const Outcome written = agree(world, result.outcome);
  const Outcome committed = previous ? agree(world, previous_commit) : Outcome{};
  if (previous && committed.code == 0) record_shared_commit(*previous);
  const std::string previous_failure =
      committed.code == 0 ? std::string()
                          : "; before it, checkpoint step " + std::to_string(*previous) + ": " + committed.message;
  if (written.code != 0) {
    if (world.rank() == 0) {
      try {
        fs::remove_tree(ckpt::temp_dir_path(options.dir, step));
      } catch (const std::exception& e) {
        TENAX_LOG(Warn, "ckpt") << "could not remove the failed checkpoint: " << e.what();
      }
    }
    throw IoError("checkpoint step " + std::to_string(step) + " failed and was removed (committed checkpoints are " +
                  "untouched): " + written.message + previous_failure);
  }

  std::ostringstream report;
  report << "F " << result.file_bytes << "\n";
  for (auto crc : result.crcs)
    report << "C " << crc << "\n";
  for (const auto& b : result.blobs)
    report << "B " << b.bytes << " " << b.crc32c << " " << b.name << "\n";
  std::vector<std::string> reports = gather_strings(world, report.str());
  committing = step;
  if (world.rank() == 0) {
    ckpt::Manifest manifest = build_manifest(step, reports);
    commit_done = io->submit([this, manifest = std::move(manifest)] {
      try {
        ckpt::commit_checkpoint(options.dir, manifest, options.keep, &vds_template);
        TENAX_LOG(Info, "ckpt") << "committed " << ckpt::final_dir_path(options.dir, manifest.step);
        return Outcome{};
      } catch (const std::exception& e) {
        return Outcome{1, "commit of checkpoint step " + std::to_string(manifest.step) + " failed: " + e.what()};
      }
    });
  }
  if (committed.code != 0)
    throw IoError("checkpoint step " + std::to_string(*previous) + ": " + committed.message + " (step " +
                  std::to_string(step) + " was written and is being committed)");
}

void Checkpointer::State::finish_commit() {
  wait_on_every_rank(world, [this](std::chrono::milliseconds t) {
    return world.rank() != 0 || commit_done.wait_for(t) == std::future_status::ready;
  });
  Outcome local;
  if (world.rank() == 0) local = take_outcome(commit_done);
  const std::uint64_t step = *committing;
  committing.reset();
  Outcome all = agree(world, local);
  if (all.code != 0) throw IoError("checkpoint step " + std::to_string(step) + ": " + all.message);
  record_shared_commit(step);
}

void Checkpointer::State::record_shared_commit(std::uint64_t step) {
  last_committed = step;
  ++commits.shared;
}

ckpt::Manifest Checkpointer::State::build_manifest(std::uint64_t step, const std::vector<std::string>& reports) const {
  ckpt::Manifest m;
  m.step = step;
  m.layout = options.layout;
  m.world_size = world.size();
  std::vector<std::vector<std::uint32_t>> crcs(reports.size());
  for (int r = 0; r < static_cast<int>(reports.size()); ++r) {
    std::istringstream in(reports[r]);
    std::string tag;
    ckpt::ManifestFile file{r, ckpt::rank_file_name(r), 0};
    while (in >> tag) {
      if (tag == "F") {
        in >> file.bytes;
      } else if (tag == "C") {
        std::uint32_t crc = 0;
        in >> crc;
        crcs[r].push_back(crc);
      } else if (tag == "B") {
        ckpt::ManifestBlob blob{r, "", 0, 0};
        in >> blob.bytes >> blob.crc32c;
        in.get();
        std::getline(in, blob.name);
        m.blobs.push_back(std::move(blob));
      }
    }
    m.files.push_back(std::move(file));
  }
  std::vector<std::size_t> next(reports.size(), 0);  // each writer's blocks arrive in plan order
  for (const auto& t : plan.tensors) {
    ckpt::ManifestTensor mt{t.name, t.dtype, t.global_shape, {}};
    for (int b : t.blocks) {
      const auto& block = plan.blocks[b];
      mt.blocks.push_back(ckpt::ManifestBlock{block.writer, block.dataset, block.box,
                                              ckpt::volume(block.box.shape) * dtype_size(t.dtype),
                                              crcs[block.writer].at(next[block.writer]++)});
    }
    m.tensors.push_back(std::move(mt));
  }
  return m;
}

}  // namespace tenax
