// Loading: pick the newest complete checkpoint every rank can read and verify, reading only the saved blocks that
// overlap this rank's shards (any saved layout), falling back to older checkpoints on damage.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <set>
#include <sstream>

#include "checkpoint/checkpointer_state.hpp"
#include "checkpoint/commit.hpp"
#include "checkpoint/crc32c.hpp"
#include "checkpoint/local_tier.hpp"
#include "checkpoint/shard_file.hpp"
#include "core/file_system.hpp"
#include "tenax/log.hpp"

namespace tenax {
namespace {

using ckpt::Box;
using ckpt::Dims;

std::string hex(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

Dims minus(const Dims& a, const Dims& b) {
  Dims r(a.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    r[i] = a[i] - b[i];
  return r;
}

// One attempt at one checkpoint directory, on the I/O thread. UsageError: the checkpoint is of another model;
// any other exception: it is damaged.
class Attempt {
 public:
  Attempt(const std::string& dir, const ckpt::Manifest& manifest, void* cuda_stream)
      : dir_(dir), m_(manifest), cuda_stream_(cuda_stream) {}

  // A model whose tensors the checkpoint lacks or holds with another dtype or shape is a model mismatch (UsageError,
  // never retried) only when the rank files say what the manifest says; when they disagree, the manifest is damaged
  // (IoError: fall back to an older checkpoint).
  void check_model(const std::vector<TensorShard>& shards) {
    for (const TensorShard& s : shards) {
      const ckpt::ManifestTensor* t = m_.find(s.name);
      if (!t) {
        confirm_against_files([&](const ckpt::ManifestTensor& other) {
          return std::none_of(shards.begin(), shards.end(), [&](const TensorShard& x) { return x.name == other.name; });
        });
        // A kind of state the checkpoint holds none of ("sgd.momentum/..." beside "adamw.m/...") says more than a
        // different model: another optimizer, or another precision's extra state.
        const std::size_t slash = s.name.find('/');
        const std::string kind = slash == std::string::npos ? "" : s.name.substr(0, slash + 1);
        const bool kind_missing =
            !kind.empty() && std::none_of(m_.tensors.begin(), m_.tensors.end(),
                                          [&](const ckpt::ManifestTensor& x) { return x.name.starts_with(kind); });
        throw UsageError("tensor '" + s.name + "' is not in the checkpoint (it holds " +
                         std::to_string(m_.tensors.size()) + " other tensors" +
                         (m_.tensors.empty() ? std::string() : ", e.g. '" + m_.tensors.front().name + "'") +
                         (kind_missing ? ", none of them '" + kind +
                                             "...'): it was saved with another optimizer or "
                                             "precision, or from a different model"
                                       : "): it was saved from a different model"));
      }
      if (t->dtype != s.dtype && t->global_shape == s.global_shape) {
        confirm_against_files([&](const ckpt::ManifestTensor& other) { return &other == t; });
        throw UsageError("tensor '" + s.name + "': the checkpoint holds it in " + std::string(dtype_name(t->dtype)) +
                         ", the model in " + std::string(dtype_name(s.dtype)) +
                         ": it was saved with another precision; resume with the precision it was saved with, or "
                         "start a new run in another checkpoint directory");
      }
      if (t->dtype != s.dtype || t->global_shape != s.global_shape) {
        confirm_against_files([&](const ckpt::ManifestTensor& other) { return &other == t; });
        throw UsageError("tensor '" + s.name + "': the checkpoint holds " + std::string(dtype_name(t->dtype)) + " " +
                         ckpt::dims_string(t->global_shape) + ", the model has " + std::string(dtype_name(s.dtype)) +
                         " " + ckpt::dims_string(s.global_shape) + ": it was saved from a different model");
      }
    }
  }

  // Raises IoError if a block's own attributes disagree with what the manifest says of it.
  void check_block(const ckpt::ManifestTensor& t, const ckpt::ManifestBlock& block,
                   const ckpt::RankFileReader::Block& opened) {
    const ckpt::BlockAttributes a = opened.attributes();
    std::string diff;
    auto differs = [&](const char* what, const std::string& in_file, const std::string& in_manifest) {
      diff += std::string(diff.empty() ? "" : ", ") + what + " " + in_file + " (manifest: " + in_manifest + ")";
    };
    if (a.tensor != t.name) differs("tensor", "'" + a.tensor + "'", "'" + t.name + "'");
    if (a.dtype != dtype_name(t.dtype)) differs("dtype", a.dtype, std::string(dtype_name(t.dtype)));
    if (a.global_shape != t.global_shape)
      differs("global_shape", ckpt::dims_string(a.global_shape), ckpt::dims_string(t.global_shape));
    if (a.offset != block.box.offset)
      differs("offset", ckpt::dims_string(a.offset), ckpt::dims_string(block.box.offset));
    if (a.shape != block.box.shape) differs("shape", ckpt::dims_string(a.shape), ckpt::dims_string(block.box.shape));
    if (a.crc32c != block.crc32c) differs("crc32c", hex(a.crc32c), hex(block.crc32c));
    if (!diff.empty())
      throw IoError(reader(block.rank).path() + " dataset " + block.dataset + " disagrees with " + dir_ + "/" +
                    ckpt::kManifestName + ": " + diff + "; the manifest or the file is damaged");
  }

  void load_shard(const TensorShard& s) {
    const ckpt::ManifestTensor& t = *m_.find(s.name);
    const std::size_t esize = dtype_size(s.dtype);
    std::vector<std::uint8_t> device_copy;
    std::uint8_t* dst = static_cast<std::uint8_t*>(s.data);
    if (s.memory == MemoryKind::Device) {
      device_copy.resize(s.bytes());
      dst = device_copy.data();
    }
    const Box want{s.offset, s.shape};
    std::uint64_t covered = 0;
    for (const ckpt::ManifestBlock& block : t.blocks) {
      auto common = ckpt::intersect(block.box, want);
      if (!common) continue;
      covered += ckpt::volume(common->shape);
      // The manifest's description of the block must be the block's own: a manifest with two blocks' offsets swapped
      // (valid JSON, every CRC intact) would otherwise load the tensor with its parts exchanged.
      ckpt::RankFileReader& file = reader(block.rank);
      const std::string& dataset = block.dataset;
      const ckpt::RankFileReader::Block opened = file.open(dataset);
      check_block(t, block, opened);
      std::uint32_t crc = 0;
      if (*common == block.box) {
        // The saved block lies inside this shard: read it straight into place and checksum it there, row by row.
        const Dims at = minus(block.box.offset, want.offset);
        opened.read(s.dtype, block.box.shape, dst, want.shape, at);
        ckpt::for_each_run(
            block.box.shape, block.box.shape, Dims(at.size(), 0), want.shape, at, esize,
            [&](std::uint64_t, std::uint64_t d, std::uint64_t n) { crc = ckpt::crc32c_extend(crc, dst + d, n); });
      } else {
        // Only part of the saved block is needed, but its checksum covers all of it: read it whole.
        scratch_.resize(block.bytes);
        opened.read(s.dtype, block.box.shape, scratch_.data(), block.box.shape, Dims(block.box.shape.size(), 0));
        crc = ckpt::crc32c_extend(0, scratch_.data(), block.bytes);
        ckpt::for_each_run(common->shape, block.box.shape, minus(common->offset, block.box.offset), want.shape,
                           minus(common->offset, want.offset), esize,
                           [&](std::uint64_t from, std::uint64_t to, std::uint64_t n) {
                             std::memcpy(dst + to, scratch_.data() + from, n);
                           });
      }
      if (crc != block.crc32c)
        throw IoError(file.path() + " dataset " + dataset + ": CRC32C mismatch (manifest " + hex(block.crc32c) +
                      ", data " + hex(crc) + "): the file is corrupt");
    }
    if (covered != ckpt::volume(want.shape))
      throw IoError(dir_ + "/" + ckpt::kManifestName + ": the blocks of '" + s.name + "' cover " +
                    std::to_string(covered) + " of the " + std::to_string(ckpt::volume(want.shape)) +
                    " elements this rank needs");
    if (s.memory == MemoryKind::Device)
      ckpt::copy_host_to_device(s.data, device_copy.data(), device_copy.size(), cuda_stream_);
  }

  Blobs load_blobs(int rank) {
    Blobs blobs;
    for (const ckpt::ManifestBlob& b : m_.blobs) {
      if (b.rank != rank) continue;
      ckpt::RankFileReader& file = reader(rank);
      std::vector<std::uint8_t> bytes = file.read_bytes(ckpt::blob_dataset(b.name), b.bytes);
      std::uint32_t crc = ckpt::crc32c_extend(0, bytes.data(), bytes.size());
      if (crc != b.crc32c)
        throw IoError(file.path() + " blob " + b.name + ": CRC32C mismatch (manifest " + hex(b.crc32c) + ", data " +
                      hex(crc) + "): the file is corrupt");
      blobs[b.name] = std::move(bytes);
    }
    return blobs;
  }

 private:
  // Cross-checks the blocks of the manifest's tensors that `pick` selects with their files (see check_model).
  template <class Pick>
  void confirm_against_files(Pick pick) {
    for (const ckpt::ManifestTensor& t : m_.tensors)
      if (pick(t))
        for (const ckpt::ManifestBlock& block : t.blocks)
          check_block(t, block, reader(block.rank).open(block.dataset));
  }

  // Opens a rank's file once per attempt, after checking it has the size recorded when it was made durable.
  ckpt::RankFileReader& reader(int rank) {
    auto it = readers_.find(rank);
    if (it != readers_.end()) return *it->second;
    const ckpt::ManifestFile* entry = nullptr;
    for (const auto& f : m_.files)
      if (f.rank == rank) entry = &f;
    if (!entry) throw IoError(dir_ + "/" + ckpt::kManifestName + ": no file listed for rank " + std::to_string(rank));
    const std::string path = fs::join(dir_, entry->name);
    if (!fs::exists(path)) throw IoError(path + ": missing");
    const std::uint64_t size = fs::file_size(path);
    if (size != entry->bytes)
      throw IoError(path + ": " + std::to_string(size) + " bytes, the manifest recorded " +
                    std::to_string(entry->bytes) + (size < entry->bytes ? " (truncated)" : ""));
    return *readers_.emplace(rank, std::make_unique<ckpt::RankFileReader>(path)).first->second;
  }

  std::string dir_;
  const ckpt::Manifest& m_;
  std::map<int, std::unique_ptr<ckpt::RankFileReader>> readers_;
  std::vector<std::uint8_t> scratch_;
  void* cuda_stream_;
};

// checkpoint.h5 is what people and other tools read: it must be the one that was committed.
void verify_vds(const std::string& dir, const ckpt::FileDigest& recorded) {
  const std::string path = fs::join(dir, recorded.name);
  if (!fs::exists(path)) throw IoError(path + ": missing");
  const std::string bytes = fs::read_file(path);
  const std::uint32_t crc = ckpt::crc32c_extend(0, bytes.data(), bytes.size());
  if (bytes.size() != recorded.bytes || crc != recorded.crc32c)
    throw IoError(path + ": " + std::to_string(bytes.size()) + " bytes with CRC32C " + hex(crc) +
                  ", the manifest recorded " + std::to_string(recorded.bytes) + " bytes with " + hex(recorded.crc32c) +
                  ": the file is damaged");
}

struct AttemptResult {
  Outcome outcome;
  LoadResult result;
};

AttemptResult attempt(const std::string& dir, const std::vector<TensorShard>& shards, int my_rank, int blob_rank,
                      int cuda_device, void* cuda_stream) {
  AttemptResult out;
  try {
    ckpt::Manifest m;
    try {
      m = ckpt::Manifest::from_json(fs::read_file(fs::join(dir, ckpt::kManifestName)));
    } catch (const std::exception& e) {
      throw IoError(dir + "/" + ckpt::kManifestName + " is unreadable: " + e.what());
    }
    // A directory copied or renamed under another step's name would be taken for that step: the newest forever, every
    // restart going back to what it really holds, and retention removing the real newer ones beside it.
    if (const std::string name = std::filesystem::path(dir).filename().string();
        name.starts_with("step_") && name != ckpt::step_dir_name(m.step))
      throw IoError(
          dir + " holds the checkpoint of step " + std::to_string(m.step) +
          " (its manifest says so), not of the step its name says: a copied or renamed directory; rename it " +
          ckpt::step_dir_name(m.step) + " to load it as that step, or remove it");
    if (my_rank == 0 && m.vds) verify_vds(dir, *m.vds);
    if (cuda_device >= 0) ckpt::use_device(cuda_device);  // this runs on the I/O thread
    Attempt a(dir, m, cuda_stream);
    a.check_model(shards);
    if (blob_rank >= m.world_size)
      throw UsageError("LoadOptions::blob_rank " + std::to_string(blob_rank) + " is not a rank of the saved world (" +
                       std::to_string(m.world_size) + " ranks)");
    if (blob_rank < 0) blob_rank = my_rank < m.world_size ? my_rank : 0;
    for (const TensorShard& s : shards)
      a.load_shard(s);
    out.result.blobs = a.load_blobs(blob_rank);
    out.result.loaded = true;
    out.result.step = m.step;
    out.result.path = dir;
    out.result.saved_layout = m.layout;
    out.result.saved_world_size = m.world_size;
    out.result.blob_rank = blob_rank;
  } catch (const UsageError& e) {
    out.outcome = Outcome{2, e.what()};
  } catch (const std::exception& e) {
    out.outcome = Outcome{1, e.what()};
  }
  return out;
}

AttemptResult take_attempt(std::future<AttemptResult>& done) {
  try {
    return done.get();
  } catch (const std::exception& e) {
    AttemptResult failed;
    failed.outcome = Outcome{1, e.what()};
    return failed;
  }
}

std::vector<std::uint64_t> parse_steps(const std::string& listing) {
  std::vector<std::uint64_t> steps;
  for (std::size_t at = 0, nl; (nl = listing.find('\n', at)) != std::string::npos; at = nl + 1)
    steps.push_back(std::stoull(listing.substr(at, nl - at)));
  return steps;
}

}  // namespace

std::optional<LoadResult> Checkpointer::State::load_local(const std::optional<std::uint64_t>& newest_shared,
                                                          std::vector<std::string>& rejected) {
  // Every rank tells what it holds: its own copies ("O <step>") and every other rank's copy its node keeps ("P <rank>
  // <step>"): as partner, or as that rank's own from before a restart that placed the ranks on other nodes. Every rank
  // of a node lists the node's copies, so they are found whichever rank is asked.
  std::string mine;
  for (std::uint64_t step : ckpt::local_steps(local_root))
    mine += "O " + std::to_string(step) + "\n";
  const std::string own_dirs = fs::parent_of(local_root);
  for (const std::string& dir : {own_dirs, fs::join(own_dirs, "partner")}) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.size() < 6 || name.size() > 15 || name.rfind("rank_", 0) != 0 ||
          name.find_first_not_of("0123456789", 5) != std::string::npos || entry.path().string() == local_root)
        continue;
      for (std::uint64_t step : ckpt::local_steps(entry.path().string()))
        mine += "P " + name.substr(5) + " " + std::to_string(step) + "\n";
    }
  }
  const std::vector<std::string> every = all_gather_strings(world, mine);
  std::vector<std::set<std::uint64_t>> own(world_size);
  std::vector<std::map<std::uint64_t, std::vector<int>>> kept_by(world_size);  // rank -> step -> holders
  std::set<std::uint64_t, std::greater<>> candidates;
  for (int h = 0; h < world_size; ++h) {
    std::istringstream in(every[h]);
    std::string tag;
    while (in >> tag) {
      long long r = h;
      std::uint64_t step = 0;
      if (tag == "P") in >> r;
      in >> step;
      if (!in || r < 0 || r >= world_size) break;
      if (tag == "O")
        own[h].insert(step);
      else
        kept_by[r][step].push_back(h);
      candidates.insert(step);
    }
  }
  for (std::uint64_t step : candidates) {
    if (newest_shared && step < *newest_shared) {
      TENAX_LOG(Info, "ckpt") << "the node-local copies (step " << step << " and older) are older than the shared "
                              << "directory's step " << *newest_shared << ": reading the shared directory";
      break;
    }
    // Where each rank's copy of this step comes from: its own (-1) or the lowest rank keeping it as partner.
    std::vector<int> holder(world_size, -1);
    int missing = -1;
    for (int r = 0; r < world_size && missing < 0; ++r) {
      if (own[r].count(step)) continue;
      auto it = kept_by[r].find(step);
      if (it == kept_by[r].end())
        missing = r;
      else
        holder[r] = it->second.front();
    }
    if (missing >= 0) {
      if (rank == 0)
        TENAX_LOG(Info, "ckpt") << "node-local step " << step << ": rank " << missing
                                << " has no copy of it, nor does its partner; trying older steps";
      continue;
    }
    if (std::any_of(holder.begin(), holder.end(), [](int h) { return h >= 0; })) {
      const Outcome fetched = fetch_from_partners(step, holder);
      if (fetched.code != 0) {
        rejected.push_back("node-local copies of step " + std::to_string(step) + ": " + fetched.message);
        TENAX_LOG(Warn, "ckpt") << "node-local copies of step " << step << " rejected: " << fetched.message
                                << "; falling back to an older copy or the shared directory";
        continue;
      }
    }
    const std::string dir = ckpt::local_step_dir(local_root, step);
    const int me = rank;
    std::future<AttemptResult> done =
        io->submit([this, &dir, me] { return attempt(dir, shards, me, -1, cuda_device, options.cuda_stream); });
    wait_on_every_rank(world,
                       [&done](std::chrono::milliseconds t) { return done.wait_for(t) == std::future_status::ready; });
    AttemptResult local = take_attempt(done);
    // The key already says the copy is this run's model: one that does not fit is damaged, not a usage error.
    if (local.outcome.code == 2) local.outcome.code = 1;
    const Outcome all = agree(world, local.outcome);
    if (all.code == 0) {
      local.result.rejected = rejected;
      local.result.node_local = true;
      TENAX_LOG(Info, "ckpt") << "loaded step " << step << " from the node-local copy " << dir
                              << (holder[rank] >= 0
                                      ? " (fetched from its partner, rank " + std::to_string(holder[rank]) + ")"
                                      : std::string());
      return std::move(local.result);
    }
    rejected.push_back("node-local copies of step " + std::to_string(step) + ": " + all.message);
    TENAX_LOG(Warn, "ckpt") << "node-local copies of step " << step << " rejected: " << all.message
                            << "; falling back to an older copy or the shared directory";
  }
  return std::nullopt;
}

LoadResult Checkpointer::load(const LoadOptions& options) {
  State& s = *state_;
  wait();
  std::string listing;
  if (s.world.rank() == 0)
    for (const auto& c : ckpt::complete_checkpoints(s.options.dir))
      if (!options.step || c.step == *options.step) listing += std::to_string(c.step) + "\n";
  listing = broadcast_string(s.world, listing, 0);
  const std::vector<std::uint64_t> steps = parse_steps(listing);
  std::vector<std::string> rejected;
  // Local steps newer than the one the run goes on from belong to a future it went back from: never load them later.
  auto prune_local = [&s](std::uint64_t loaded) {
    if (s.local_root.empty()) return;
    try {
      if (int n = ckpt::remove_local_steps_after(s.local_root, loaded))
        TENAX_LOG(Info, "ckpt") << "removed " << n << " node-local copies newer than step " << loaded;
    } catch (const std::exception& e) {
      TENAX_LOG(Warn, "ckpt") << "could not remove node-local copies newer than step " << loaded << ": " << e.what();
    }
  };
  if (!s.local_root.empty() && !options.step &&
      every_rank(s.world, options.blob_rank < 0 || options.blob_rank == s.world.rank())) {
    std::optional<LoadResult> local =
        s.load_local(steps.empty() ? std::nullopt : std::optional<std::uint64_t>(steps.front()), rejected);
    if (local) {
      prune_local(local->step);
      return std::move(*local);
    }
  }
  if (steps.empty()) {
    if (options.step)
      throw IoError("checkpoint step " + std::to_string(*options.step) + " is not a complete checkpoint in " +
                    s.options.dir);
    TENAX_LOG(Info, "ckpt") << "no checkpoint in " << s.options.dir << ": starting fresh";
    prune_local(0);
    LoadResult fresh;
    fresh.rejected = std::move(rejected);
    return fresh;
  }

  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string dir = ckpt::final_dir_path(s.options.dir, steps[i]);
    const int rank = s.world.rank();
    std::future<AttemptResult> done = s.io->submit([&s, &dir, rank, &options] {
      return attempt(dir, s.shards, rank, options.blob_rank, s.cuda_device, s.options.cuda_stream);
    });
    // A rank with much to read must not leave the others in one long collective (the watchdog would end them).
    wait_on_every_rank(s.world,
                       [&done](std::chrono::milliseconds t) { return done.wait_for(t) == std::future_status::ready; });
    AttemptResult local = take_attempt(done);
    Outcome all = agree(s.world, local.outcome);
    if (all.code == 0) {
      if (!options.step) prune_local(local.result.step);
      local.result.rejected = std::move(rejected);
      TENAX_LOG(Info, "ckpt") << "loaded " << dir << " (saved by " << local.result.saved_world_size << " ranks)";
      return std::move(local.result);
    }
    if (all.code == 2) throw UsageError("checkpoint " + dir + " does not fit this model: " + all.message);
    rejected.push_back(dir + ": " + all.message);
    const bool more = !options.step && i + 1 < steps.size();
    TENAX_LOG(Warn, "ckpt") << "checkpoint " << dir << " rejected: " << all.message
                            << (more ? "; falling back to the previous complete checkpoint" : "");
    if (options.step) throw IoError("checkpoint " + dir + " is not valid: " + all.message);
  }
  std::string reasons;
  for (const auto& r : rejected)
    reasons += "\n  " + r;
  throw IoError("no valid checkpoint in " + s.options.dir + " (" + std::to_string(rejected.size()) +
                " complete ones, all damaged):" + reasons +
                "\n  to go on, restore them from a copy, or move them aside to start the run from scratch (with "
                "tenax-launch, a new --checkpoint-dir)");
}

}  // namespace tenax
