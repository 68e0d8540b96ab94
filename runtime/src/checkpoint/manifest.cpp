#include "checkpoint/manifest.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "checkpoint/crc32c.hpp"
#include "checkpoint/names.hpp"
#include "core/json.hpp"

namespace tenax::ckpt {

std::string rank_file_name(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "rank_%05d.h5", rank);
  return buf;
}

std::string tensor_dataset(const std::string& tensor) {
  return "/tensors/" + tensor;
}
std::string block_dataset(const std::string& tensor, int ordinal_in_file, int blocks_in_file) {
  if (blocks_in_file <= 1) return tensor_dataset(tensor);
  return tensor_dataset(tensor) + "@" + std::to_string(ordinal_in_file);
}
std::string blob_dataset(const std::string& blob) {
  return "/blobs/" + blob;
}

namespace {

[[noreturn]] void damaged(const std::string& why) {
  throw std::runtime_error("manifest: " + why);
}

void append_dims(std::string& out, const Dims& d) {
  out += '[';
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(d[i]);
  }
  out += ']';
}

// Tensors in tenax have 1 to 64 dimensions (the writer's limit too).
Dims read_dims(const json::Value& v) {
  Dims d;
  for (const auto& x : v.array())
    d.push_back(x.u64());
  if (d.empty() || d.size() > 64) damaged(v.describe() + " has " + std::to_string(d.size()) + " dimensions (1 to 64)");
  return d;
}

int read_int(const json::Value& v) {
  std::uint64_t x = v.u64();
  if (x > 1u << 30) damaged(v.describe() + " = " + std::to_string(x) + " is out of range");
  return static_cast<int>(x);
}

std::uint32_t read_u32(const json::Value& v) {
  std::uint64_t x = v.u64();
  if (x > 0xffffffffull) damaged(v.describe() + " = " + std::to_string(x) + " is not a 32-bit checksum");
  return static_cast<std::uint32_t>(x);
}

int read_rank(const json::Value& v, int world_size) {
  const int r = read_int(v);
  if (r >= world_size)
    damaged(v.describe() + " = " + std::to_string(r) + " is not a rank of the saved world of " +
            std::to_string(world_size));
  return r;
}

// Version 3 ends with "manifest_crc32c": the CRC32C of every byte before that key's opening quote.
void verify_checksum(std::string_view text, const json::Value& root) {
  const json::Value* stored = root.find(kManifestChecksumKey);
  if (!stored) damaged(std::string("no \"") + kManifestChecksumKey + "\": a version 3 manifest is checksummed");
  if (root.members().back().key() != kManifestChecksumKey)
    damaged(std::string("\"") + kManifestChecksumKey + "\" is not the last member");
  // The key as written by tenax; the same key spelt with JSON escapes (which the parser accepts) is not.
  const std::size_t at = text.rfind(std::string("\"") + kManifestChecksumKey + "\"");
  if (at == std::string_view::npos)
    damaged(std::string("\"") + kManifestChecksumKey + "\" is not written literally (escaped characters in the key)");
  const std::uint32_t want = read_u32(*stored);
  const std::uint32_t got = crc32c_extend(0, text.data(), at);
  if (got != want) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "checksum mismatch (recorded 0x%08x, text 0x%08x)", want, got);
    damaged(buf);
  }
}

// The dataset names a writer gives a tensor's blocks: /tensors/<name> or /tensors/<name>@<k>.
bool is_dataset_of(const std::string& dataset, const std::string& tensor) {
  const std::string base = tensor_dataset(tensor);
  if (dataset == base) return true;
  if (dataset.size() <= base.size() + 1 || dataset.compare(0, base.size(), base) != 0 || dataset[base.size()] != '@')
    return false;
  for (std::size_t i = base.size() + 1; i < dataset.size(); ++i)
    if (dataset[i] < '0' || dataset[i] > '9') return false;
  return dataset.size() - base.size() - 1 <= 9;
}

void validate_tensor(const ManifestTensor& t, const std::vector<bool>& has_file, bool rank_scoped) {
  const std::string who = "tensor '" + t.name + "'";
  if (auto problem = tensor_name_problem(t.name)) damaged(who + ": the name " + *problem);
  for (auto d : t.global_shape)
    if (d == 0) damaged(who + " has a zero dimension in its global shape " + dims_string(t.global_shape));
  try {
    byte_size(t.global_shape, dtype_size(t.dtype));
  } catch (const std::overflow_error& e) {
    damaged(who + ": " + e.what());
  }
  std::vector<const Box*> boxes;
  std::set<std::pair<int, std::string>> datasets;
  for (const ManifestBlock& b : t.blocks) {
    if (!has_file[b.rank])
      damaged(who + " has a block in rank " + std::to_string(b.rank) + "'s file, which is not listed");
    if (!is_dataset_of(b.dataset, t.name))
      damaged(who + ": a block names dataset '" + b.dataset + "', which is not one of that tensor's");
    if (!datasets.emplace(b.rank, b.dataset).second)
      damaged(who + ": two blocks name dataset '" + b.dataset + "' of rank " + std::to_string(b.rank) + "'s file");
    if (b.box.offset.size() != t.global_shape.size() || b.box.shape.size() != t.global_shape.size())
      damaged(who + ": a block has the wrong number of dimensions");
    if (!inside(b.box, t.global_shape))
      damaged(who + ": the block at " + dims_string(b.box.offset) + " of shape " + dims_string(b.box.shape) +
              " is not inside its global shape " + dims_string(t.global_shape));
    if (b.bytes != byte_size(b.box.shape, dtype_size(t.dtype)))
      damaged(who + ": the block at " + dims_string(b.box.offset) + " records " + std::to_string(b.bytes) +
              " bytes, its shape " + dims_string(b.box.shape) + " of " + std::string(dtype_name(t.dtype)) + " has " +
              std::to_string(byte_size(b.box.shape, dtype_size(t.dtype))));
    boxes.push_back(&b.box);
  }
  if (auto problem = check_tiling(t.global_shape, boxes)) {
    if (problem->kind == TilingProblem::Uncovered && rank_scoped) {
      // One rank's part of the tensor: only overlaps are damage (a rank holds few blocks, so pairwise is cheap).
      for (std::size_t i = 0; i < boxes.size(); ++i)
        for (std::size_t j = i + 1; j < boxes.size(); ++j)
          if (intersect(*boxes[i], *boxes[j]))
            damaged(who + ": the blocks at " + dims_string(boxes[i]->offset) + " and " + dims_string(boxes[j]->offset) +
                    " overlap");
      return;
    }
    if (problem->kind == TilingProblem::Uncovered)
      damaged(who + ": its blocks cover " + std::to_string(problem->covered) + " of its " +
              std::to_string(volume(t.global_shape)) + " elements");
    const Box& a = *boxes[problem->first];
    const Box& b = *boxes[problem->second];
    damaged(who + ": the blocks at " + dims_string(a.offset) + " and " + dims_string(b.offset) + " overlap");
  }
}

}  // namespace

std::string Manifest::to_json() const {
  std::string o;
  o += "{\n  \"format\": \"tenax-checkpoint\",\n  \"version\": " + std::to_string(version);
  o += ",\n  \"step\": " + std::to_string(step);
  o += ",\n  \"world_size\": " + std::to_string(world_size);
  o += ",\n  \"layout\": {\"tp\": " + std::to_string(layout.tp) + ", \"pp\": " + std::to_string(layout.pp) +
       ", \"dp\": " + std::to_string(layout.dp) + "}";
  o += ",\n  \"files\": [";
  for (std::size_t i = 0; i < files.size(); ++i) {
    o += i ? ",\n    " : "\n    ";
    o += "{\"rank\": " + std::to_string(files[i].rank) + ", \"name\": ";
    json::append_string(o, files[i].name);
    o += ", \"bytes\": " + std::to_string(files[i].bytes) + "}";
  }
  o += "\n  ],\n  \"tensors\": [";
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    o += i ? ",\n    " : "\n    ";
    o += "{\"name\": ";
    json::append_string(o, t.name);
    o += ", \"dtype\": \"" + std::string(dtype_name(t.dtype)) + "\", \"global_shape\": ";
    append_dims(o, t.global_shape);
    o += ", \"blocks\": [";
    for (std::size_t j = 0; j < t.blocks.size(); ++j) {
      const auto& b = t.blocks[j];
      o += j ? ",\n      " : "\n      ";
      o += "{\"rank\": " + std::to_string(b.rank) + ", \"dataset\": ";
      json::append_string(o, b.dataset);
      o += ", \"offset\": ";
      append_dims(o, b.box.offset);
      o += ", \"shape\": ";
      append_dims(o, b.box.shape);
      o += ", \"bytes\": " + std::to_string(b.bytes) + ", \"crc32c\": " + std::to_string(b.crc32c) + "}";
    }
    o += "]}";
  }
  o += "\n  ],\n  \"blobs\": [";
  for (std::size_t i = 0; i < blobs.size(); ++i) {
    o += i ? ",\n    " : "\n    ";
    o += "{\"rank\": " + std::to_string(blobs[i].rank) + ", \"name\": ";
    json::append_string(o, blobs[i].name);
    o += ", \"bytes\": " + std::to_string(blobs[i].bytes) + ", \"crc32c\": " + std::to_string(blobs[i].crc32c) + "}";
  }
  o += "\n  ]";
  if (version < 3) return o + "\n}\n";
  if (rank_scoped) o += ",\n  \"scope\": \"rank\"";
  if (vds) {
    o += ",\n  \"vds\": {\"name\": ";
    json::append_string(o, vds->name);
    o += ", \"bytes\": " + std::to_string(vds->bytes) + ", \"crc32c\": " + std::to_string(vds->crc32c) + "}";
  }
  o += ",\n  ";
  const std::uint32_t crc = crc32c_extend(0, o.data(), o.size());
  o += std::string("\"") + kManifestChecksumKey + "\": " + std::to_string(crc) + "\n}\n";
  return o;
}

Manifest Manifest::from_json(std::string_view text) {
  json::Value root = json::Value::parse(text);
  if (root.at("format").string() != "tenax-checkpoint") damaged("not a tenax checkpoint");
  Manifest m;
  m.version = root.at("version").u64();
  if (m.version < kOldestReadableVersion || m.version > kFormatVersion)
    damaged("format version " + std::to_string(m.version) + " is not supported (this tenax reads versions " +
            std::to_string(kOldestReadableVersion) + " to " + std::to_string(kFormatVersion) +
            "; a newer tenax wrote it)");
  if (m.version >= 3) verify_checksum(text, root);
  m.step = root.at("step").u64();
  m.world_size = read_int(root.at("world_size"));
  if (m.world_size < 1) damaged("world_size is 0");
  const auto& layout = root.at("layout");
  m.layout = ParallelLayout{read_int(layout.at("tp")), read_int(layout.at("pp")), read_int(layout.at("dp"))};

  if (const json::Value* scope = root.find("scope")) {
    if (m.version < 3 || scope->string() != "rank") damaged("unknown scope '" + scope->string() + "'");
    m.rank_scoped = true;
  }
  std::vector<bool> has_file(m.world_size, false);
  for (const auto& f : root.at("files").array()) {
    ManifestFile file{read_rank(f.at("rank"), m.world_size), f.at("name").string(), f.at("bytes").u64()};
    // Loading opens <dir>/<name>: anything but the rank's own file name could reach outside the checkpoint.
    if (file.name != rank_file_name(file.rank))
      damaged("the file of rank " + std::to_string(file.rank) + " is named '" + file.name + "', not '" +
              rank_file_name(file.rank) + "'");
    if (has_file[file.rank]) damaged("rank " + std::to_string(file.rank) + "'s file is listed twice");
    has_file[file.rank] = true;
    m.files.push_back(std::move(file));
  }
  if (m.rank_scoped && m.files.size() != 1)
    damaged("a rank-scoped manifest lists " + std::to_string(m.files.size()) + " files, not one");
  for (const auto& t : root.at("tensors").array()) {
    ManifestTensor mt;
    mt.name = t.at("name").string();
    auto dtype = parse_dtype(t.at("dtype").string());
    if (!dtype) damaged("tensor '" + mt.name + "' has an unknown dtype");
    mt.dtype = *dtype;
    mt.global_shape = read_dims(t.at("global_shape"));
    for (const auto& b : t.at("blocks").array()) {
      ManifestBlock mb;
      mb.rank = read_rank(b.at("rank"), m.world_size);
      mb.dataset = m.version >= 2 ? b.at("dataset").string() : tensor_dataset(mt.name);
      mb.box.offset = read_dims(b.at("offset"));
      mb.box.shape = read_dims(b.at("shape"));
      mb.bytes = b.at("bytes").u64();
      mb.crc32c = read_u32(b.at("crc32c"));
      mt.blocks.push_back(std::move(mb));
    }
    validate_tensor(mt, has_file, m.rank_scoped);
    m.tensors.push_back(std::move(mt));
  }
  std::sort(m.tensors.begin(), m.tensors.end(),
            [](const ManifestTensor& a, const ManifestTensor& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < m.tensors.size(); ++i)
    if (m.tensors[i].name == m.tensors[i - 1].name) damaged("tensor '" + m.tensors[i].name + "' is listed twice");

  std::set<std::pair<int, std::string>> blob_names;
  for (const auto& b : root.at("blobs").array()) {
    ManifestBlob blob{read_rank(b.at("rank"), m.world_size), b.at("name").string(), b.at("bytes").u64(),
                      read_u32(b.at("crc32c"))};
    if (auto problem = blob_name_problem(blob.name)) damaged("blob '" + blob.name + "': the name " + *problem);
    if (!has_file[blob.rank])
      damaged("blob '" + blob.name + "' is in rank " + std::to_string(blob.rank) + "'s file, which is not listed");
    if (!blob_names.emplace(blob.rank, blob.name).second)
      damaged("blob '" + blob.name + "' of rank " + std::to_string(blob.rank) + " is listed twice");
    m.blobs.push_back(std::move(blob));
  }
  if (const json::Value* v = root.find("vds")) {
    m.vds = FileDigest{v->at("name").string(), v->at("bytes").u64(), read_u32(v->at("crc32c"))};
    if (m.vds->name != kVdsName)
      damaged("the virtual-dataset file is named '" + m.vds->name + "', not '" + kVdsName + "'");
  }
  return m;
}

const ManifestTensor* Manifest::find(const std::string& name) const {
  auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                             [](const ManifestTensor& t, const std::string& n) { return t.name < n; });
  return it != tensors.end() && it->name == name ? &*it : nullptr;
}

}  // namespace tenax::ckpt
