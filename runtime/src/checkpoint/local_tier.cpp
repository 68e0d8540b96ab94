// The node-local tier: writing, listing and pruning one rank's copies; the run id and the key that scope them.
#include "checkpoint/local_tier.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>

#include "checkpoint/commit.hpp"
#include "checkpoint/crc32c.hpp"
#include "checkpoint/manifest.hpp"
#include "checkpoint/shard_file.hpp"
#include "core/file_system.hpp"
#include "core/host_name.hpp"
#include "core/unique_fd.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"

namespace tenax::ckpt {
namespace {

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// step_<N> (complete), step_<N>.tmp (being written), step_<N>.deleting (being removed): the step, or nothing.
std::optional<std::uint64_t> step_of(const std::string& name, std::string_view suffix) {
  const std::string_view prefix = "step_";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 19 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoull(digits);
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    names.push_back(entry.path().filename().string());
  return names;
}

// Moves a step aside before removing it, so that a crash half-way never leaves a step that looks complete.
void remove_step(const std::string& root, const std::string& name) {
  const std::string doomed = fs::join(root, name + ".deleting");
  fs::remove_tree(doomed);
  fs::rename_path(fs::join(root, name), doomed);
  fs::remove_tree(doomed);
}

std::uint32_t read_u32(const PackedStep& b, std::size_t end, std::size_t& at) {
  if (end - at < 4) throw IoError("partner copy: truncated");
  std::uint32_t v = 0;
  std::memcpy(&v, b.data() + at, 4);
  at += 4;
  return v;
}

std::uint64_t read_u64(const PackedStep& b, std::size_t end, std::size_t& at) {
  if (end - at < 8) throw IoError("partner copy: truncated");
  std::uint64_t v = 0;
  std::memcpy(&v, b.data() + at, 8);
  at += 8;
  return v;
}

constexpr std::uint32_t kPackMagic = 0x50584e54;  // "TNXP"

}  // namespace

namespace {

// Writes step `step` of `root` through `fill(tmp)` into step_<N>.tmp, fsyncs it and renames it into place (replacing an
// older copy of the same step only now), then keeps the newest `keep` steps. A failure leaves no partial step.
template <class Fill>
void write_step(const std::string& root, std::uint64_t step, int keep, Fill fill) {
  const std::string final_dir = fs::join(root, step_dir_name(step));
  const std::string tmp = final_dir + ".tmp";
  try {
    fs::make_dirs(root);
    fs::remove_tree(tmp);
    fs::make_dirs(tmp);
    fill(tmp);
    fs::fsync_path(tmp);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove_all(tmp, ignored);
    throw;
  }
  if (fs::exists(final_dir)) remove_step(root, step_dir_name(step));  // saved again after going back
  fs::rename_path(tmp, final_dir);
  fs::fsync_path(root);
  const std::vector<std::uint64_t> steps = local_steps(root);
  for (std::size_t i = static_cast<std::size_t>(std::max(keep, 1)); i < steps.size(); ++i)
    remove_step(root, step_dir_name(steps[i]));
}

}  // namespace

std::string read_run_id(const std::string& shared_dir) {
  const std::string path = fs::join(shared_dir, kRunIdName);
  if (!fs::exists(path)) return "";
  std::string id = fs::read_file(path);
  while (!id.empty() && (id.back() == '\n' || id.back() == '\r'))
    id.pop_back();
  return id;
}

std::string create_run_id(const std::string& shared_dir) {
  std::string id = read_run_id(shared_dir);
  if (!id.empty()) return id;
  std::random_device rd;
  id = hex64((static_cast<std::uint64_t>(rd()) << 32) ^ rd());
  fs::replace_file_atomically(fs::join(shared_dir, kRunIdName), id + "\n", fs::Durability::ContentsAndName);
  return id;
}

std::string local_tier_key(const std::string& shared_dir, const std::string& run_id, int world_size,
                           const std::vector<std::string>& descriptions) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::weakly_canonical(shared_dir, ec);
  std::string text = (ec ? shared_dir : absolute.string()) + "\n" + run_id + "\n" + std::to_string(world_size) + "\n";
  for (const std::string& d : descriptions)
    text += d + "\n--\n";
  // Two CRC32Cs with different seeds: 64 bits, enough to tell a few runs on one node apart.
  const std::uint64_t hi = crc32c_extend(0, text.data(), text.size());
  const std::uint64_t lo = crc32c_extend(0x9e3779b9u, text.data(), text.size());
  return hex64(hi << 32 | lo);
}

std::string local_rank_root(const std::string& local_dir, const std::string& key, int rank) {
  return fs::join(fs::join(local_dir, "tenax-" + key), "rank_" + std::to_string(rank));
}

std::string partner_root(const std::string& local_dir, const std::string& key, int rank) {
  return fs::join(fs::join(fs::join(local_dir, "tenax-" + key), "partner"), "rank_" + std::to_string(rank));
}

std::vector<int> partner_ranks(const std::vector<std::string>& node_of_rank,
                               const std::vector<std::string>& domain_of_rank) {
  std::vector<std::string> nodes;          // in the order of their lowest rank
  std::vector<std::vector<int>> ranks_on;  // per node, ascending
  std::vector<std::pair<int, int>> place;  // per rank: (node index, index on the node)
  std::vector<std::string> domains;        // in the order of their lowest rank
  std::vector<std::vector<int>> nodes_in;  // per domain, node indices ascending
  for (int r = 0; r < static_cast<int>(node_of_rank.size()); ++r) {
    auto it = std::find(nodes.begin(), nodes.end(), node_of_rank[r]);
    const int n = static_cast<int>(it - nodes.begin());
    if (it == nodes.end()) {
      nodes.push_back(node_of_rank[r]);
      ranks_on.emplace_back();
      // A node's domain is its lowest rank's (the ranks of one node report the same one).
      const std::string domain = r < static_cast<int>(domain_of_rank.size()) ? domain_of_rank[r] : "";
      auto d = std::find(domains.begin(), domains.end(), domain);
      if (d == domains.end()) {
        domains.push_back(domain);
        nodes_in.emplace_back();
        d = domains.end() - 1;
      }
      nodes_in[d - domains.begin()].push_back(n);
    }
    place.emplace_back(n, static_cast<int>(ranks_on[n].size()));
    ranks_on[n].push_back(r);
  }
  std::vector<int> partner(node_of_rank.size(), -1);
  if (nodes.size() < 2) return partner;
  std::vector<int> ring;  // node indices
  if (nodes_in.size() == 1) {
    for (int n = 0; n < static_cast<int>(nodes.size()); ++n)
      ring.push_back(n);
  } else {
    // The nodes domain by domain, the largest domain first, dealt to the even places of the ring and then to the odd
    // ones: no two neighbours share a domain whenever no domain holds more than half of the nodes.
    std::vector<int> by_size(nodes_in.size());
    for (int d = 0; d < static_cast<int>(by_size.size()); ++d)
      by_size[d] = d;
    std::stable_sort(by_size.begin(), by_size.end(),
                     [&](int a, int b) { return nodes_in[a].size() > nodes_in[b].size(); });
    ring.resize(nodes.size());
    const std::size_t evens = (nodes.size() + 1) / 2;
    std::size_t dealt = 0;
    for (int d : by_size)
      for (int n : nodes_in[d]) {
        ring[dealt < evens ? 2 * dealt : 2 * (dealt - evens) + 1] = n;
        ++dealt;
      }
  }
  std::vector<int> next_node(nodes.size());
  for (std::size_t i = 0; i < ring.size(); ++i)
    next_node[ring[i]] = ring[(i + 1) % ring.size()];
  for (std::size_t r = 0; r < partner.size(); ++r) {
    const auto& next = ranks_on[next_node[place[r].first]];
    partner[r] = next[place[r].second % next.size()];
  }
  return partner;
}

std::string node_name(const CheckpointOptions& options) {
  return options.node_name.empty() ? detail::node_name() : options.node_name;
}

std::string local_copies_job() {
  std::string job = env::get_string("TENAX_JOB_ID");
  const char* source = "TENAX_JOB_ID";
  if (job.empty()) {
    const char* slurm = std::getenv("SLURM_JOB_ID");
    job = slurm ? slurm : "";
    source = "SLURM_JOB_ID";
  }
  const bool printable = std::all_of(job.begin(), job.end(), [](char c) { return c > ' ' && c < 0x7f; });
  if (job.size() > kMaxJobIdLength || !printable) {
    throw UsageError(
        std::string(source) + "='" + job.substr(0, kMaxJobIdLength) + (job.size() > kMaxJobIdLength ? "...'" : "'") +
        " cannot name the job of the node-local copies: expected at most " + std::to_string(kMaxJobIdLength) +
        " printable characters without spaces; unset it or give a "
        "shorter id");
  }
  return job;
}

std::string leaf_switch(const char* topology_addr, const char* topology_addr_pattern) {
  if (topology_addr == nullptr || topology_addr_pattern == nullptr) return "";
  auto split = [](std::string_view text) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (std::size_t dot; (dot = text.find('.', start)) != std::string_view::npos; start = dot + 1)
      parts.emplace_back(text.substr(start, dot - start));
    parts.emplace_back(text.substr(start));
    return parts;
  };
  const std::vector<std::string> addr = split(topology_addr), kinds = split(topology_addr_pattern);
  if (addr.size() != kinds.size() || addr.size() < 2 || kinds.back() != "node" || kinds[kinds.size() - 2] != "switch")
    return "";
  return addr[addr.size() - 2];
}

void pack_step(const std::string& step_dir, PackedStep& out) {
  std::vector<std::string> names = entries(step_dir);
  std::sort(names.begin(), names.end());
  // A step without its manifest (missing, or never completed) is not a copy to hand anyone.
  if (!std::binary_search(names.begin(), names.end(), std::string(kManifestName)))
    throw IoError("node-local step " + step_dir + " has no " + kManifestName + " (missing or incomplete): not packed");
  // Every file opened and sized first, so that the buffer is allocated once at its final size.
  struct File {
    std::string path;
    UniqueFd fd;
    std::uint64_t size = 0;
  };
  std::vector<File> files;
  std::size_t total = 4 + 4 + 4;  // magic, file count, CRC32C
  for (const std::string& name : names) {
    File& f = files.emplace_back();
    f.path = fs::join(step_dir, name);
    f.fd.reset(fs::open_file(f.path, O_RDONLY));
    struct stat st {};
    if (::fstat(f.fd.get(), &st) != 0) fs::throw_errno("stat", f.path, errno);
    f.size = static_cast<std::uint64_t>(st.st_size);
    total += 4 + name.size() + 8 + f.size;
  }
  out.clear();  // a buffer too small for this step is not copied over when it grows
  out.resize(total);
  std::size_t at = 0;
  auto put = [&](const void* data, std::size_t n) {
    std::memcpy(out.data() + at, data, n);
    at += n;
  };
  auto put_u32 = [&](std::uint32_t v) { put(&v, 4); };
  put_u32(kPackMagic);
  put_u32(static_cast<std::uint32_t>(names.size()));
  for (std::size_t i = 0; i < files.size(); ++i) {
    put_u32(static_cast<std::uint32_t>(names[i].size()));
    put(names[i].data(), names[i].size());
    const std::uint64_t size = files[i].size;
    put(&size, 8);
    // read_exact names the file when it ended early (it changed since it was sized).
    fs::read_exact(files[i].fd.get(), out.data() + at, size, 0, files[i].path);
    at += size;
  }
  put_u32(crc32c_extend(0, out.data(), at));
}

PackedStep pack_step(const std::string& step_dir) {
  PackedStep out;
  pack_step(step_dir, out);
  return out;
}

void unpack_step(const std::string& root, std::uint64_t step, const PackedStep& packed, int keep) {
  const std::string what = "partner copy of step " + std::to_string(step);
  if (packed.size() < 12) throw IoError(what + ": truncated");
  const std::size_t end = packed.size() - 4;
  std::uint32_t crc = 0;
  std::memcpy(&crc, packed.data() + end, 4);
  if (crc != crc32c_extend(0, packed.data(), end)) throw IoError(what + ": CRC32C mismatch (damaged in transfer)");
  std::size_t at = 0;
  if (read_u32(packed, end, at) != kPackMagic) throw IoError(what + ": not a packed step");
  const std::uint32_t files = read_u32(packed, end, at);
  write_step(root, step, keep, [&](const std::string& tmp) {
    for (std::uint32_t i = 0; i < files; ++i) {
      const std::uint32_t name_size = read_u32(packed, end, at);
      if (name_size == 0 || name_size > 255 || end - at < name_size) throw IoError(what + ": a bad file name");
      const std::string name(reinterpret_cast<const char*>(packed.data() + at), name_size);
      at += name_size;
      // Only the names a step holds: nothing that arrives may name a path outside it.
      if (name != kManifestName && (name.rfind("rank_", 0) != 0 || name.find('/') != std::string::npos))
        throw IoError(what + ": an unexpected file '" + name + "'");
      const std::uint64_t size = read_u64(packed, end, at);
      if (end - at < size) throw IoError(what + ": truncated");
      fs::write_file_durable(fs::join(tmp, name),
                             std::string_view(reinterpret_cast<const char*>(packed.data() + at), size));
      at += size;
    }
    if (at != end) throw IoError(what + ": trailing bytes");
  });
}

std::string local_step_dir(const std::string& root, std::uint64_t step) {
  return fs::join(root, step_dir_name(step));
}

void write_local_copy(const std::string& root, std::uint64_t step, int rank, int world_size,
                      const ParallelLayout& layout, const std::vector<LocalShard>& shards, const Blobs& blobs, int keep,
                      bool direct_io, FileTemplate* reuse) {
  write_step(root, step, keep, [&](const std::string& tmp) {
    std::map<std::string, int> blocks_of;  // how many blocks of each tensor the file holds
    for (const LocalShard& s : shards)
      ++blocks_of[s.shard->name];
    std::map<std::string, int> ordinal;
    Manifest m;
    m.step = step;
    m.layout = layout;
    m.world_size = world_size;
    m.rank_scoped = true;
    std::map<std::string, ManifestTensor> tensors;
    std::vector<ShardWrite> writes;
    for (const LocalShard& s : shards) {
      const TensorShard& t = *s.shard;
      const std::string dataset = block_dataset(t.name, ordinal[t.name]++, blocks_of[t.name]);
      const Box box{t.offset, t.shape};
      writes.push_back(ShardWrite{t.name, dataset, t.dtype, t.global_shape, box, s.staged, s.crc32c});
      ManifestTensor& mt = tensors[t.name];
      mt.name = t.name;
      mt.dtype = t.dtype;
      mt.global_shape = t.global_shape;
      mt.blocks.push_back(ManifestBlock{rank, dataset, box, t.bytes(), s.crc32c});
    }
    for (auto& [name, t] : tensors)
      m.tensors.push_back(std::move(t));
    std::vector<BlobWrite> blob_writes;
    for (const auto& [name, bytes] : blobs) {
      const std::uint32_t crc = crc32c_extend(0, bytes.data(), bytes.size());
      blob_writes.push_back(BlobWrite{name, &bytes, crc});
      m.blobs.push_back(ManifestBlob{rank, name, bytes.size(), crc});
    }
    const std::string file = fs::join(tmp, rank_file_name(rank));
    const RankFileWritten written =
        write_rank_file(file, RankFileHeader{step, rank, world_size, layout}, writes, blob_writes, direct_io, reuse);
    m.files.push_back(ManifestFile{rank, rank_file_name(rank), written.file_bytes});
    fs::write_file_durable(fs::join(tmp, kManifestName), m.to_json());
  });
}

std::vector<std::uint64_t> local_steps(const std::string& root) {
  std::vector<std::uint64_t> steps;
  for (const std::string& name : entries(root))
    if (auto step = step_of(name, ""))
      if (fs::exists(fs::join(fs::join(root, name), kManifestName))) steps.push_back(*step);
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

int remove_local_steps_after(const std::string& root, std::uint64_t step) {
  int removed = 0;
  for (const std::string& name : entries(root))
    if (auto s = step_of(name, ""); s && *s > step) {
      remove_step(root, name);
      ++removed;
    }
  return removed;
}

int remove_local_leftovers(const std::string& root) {
  int removed = 0;
  for (const std::string& name : entries(root))
    if (step_of(name, ".tmp") || step_of(name, ".deleting")) {
      fs::remove_tree(fs::join(root, name));
      ++removed;
    }
  return removed;
}

}  // namespace tenax::ckpt
