#include "checkpoint/manifest.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

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

void append_dims(std::string& out, const Dims& d) {
  out += '[';
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(d[i]);
  }
  out += ']';
}

Dims read_dims(const json::Value& v) {
  Dims d;
  for (const auto& x : v.array())
    d.push_back(x.u64());
  return d;
}

int read_int(const json::Value& v) {
  std::uint64_t x = v.u64();
  if (x > 1u << 30) throw std::runtime_error("manifest: integer out of range");
  return static_cast<int>(x);
}

std::uint32_t read_u32(const json::Value& v) {
  std::uint64_t x = v.u64();
  if (x > 0xffffffffull) throw std::runtime_error("manifest: checksum out of range");
  return static_cast<std::uint32_t>(x);
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
  o += "\n  ]\n}\n";
  return o;
}

Manifest Manifest::from_json(std::string_view text) {
  json::Value root = json::Value::parse(text);
  if (root.at("format").string() != "tenax-checkpoint") throw std::runtime_error("manifest: not a tenax checkpoint");
  Manifest m;
  m.version = root.at("version").u64();
  if (m.version < kOldestReadableVersion || m.version > kFormatVersion)
    throw std::runtime_error("manifest: format version " + std::to_string(m.version) +
                             " is not supported (this tenax reads versions " + std::to_string(kOldestReadableVersion) +
                             " to " + std::to_string(kFormatVersion) + "; a newer tenax wrote it)");
  m.step = root.at("step").u64();
  m.world_size = read_int(root.at("world_size"));
  const auto& layout = root.at("layout");
  m.layout = ParallelLayout{read_int(layout.at("tp")), read_int(layout.at("pp")), read_int(layout.at("dp"))};
  for (const auto& f : root.at("files").array())
    m.files.push_back(ManifestFile{read_int(f.at("rank")), f.at("name").string(), f.at("bytes").u64()});
  for (const auto& t : root.at("tensors").array()) {
    ManifestTensor mt;
    mt.name = t.at("name").string();
    auto dtype = parse_dtype(t.at("dtype").string());
    if (!dtype) throw std::runtime_error("manifest: tensor '" + mt.name + "' has an unknown dtype");
    mt.dtype = *dtype;
    mt.global_shape = read_dims(t.at("global_shape"));
    for (const auto& b : t.at("blocks").array()) {
      ManifestBlock mb;
      mb.rank = read_int(b.at("rank"));
      mb.dataset = m.version >= 2 ? b.at("dataset").string() : tensor_dataset(mt.name);
      if (mb.dataset.rfind(tensor_dataset(mt.name), 0) != 0)
        throw std::runtime_error("manifest: a block of tensor '" + mt.name + "' names dataset '" + mb.dataset +
                                 "', which is not one of that tensor's");
      mb.box.offset = read_dims(b.at("offset"));
      mb.box.shape = read_dims(b.at("shape"));
      mb.bytes = b.at("bytes").u64();
      mb.crc32c = read_u32(b.at("crc32c"));
      if (mb.box.offset.size() != mt.global_shape.size() || mb.box.shape.size() != mt.global_shape.size())
        throw std::runtime_error("manifest: a block of tensor '" + mt.name + "' has the wrong number of dimensions");
      mt.blocks.push_back(std::move(mb));
    }
    m.tensors.push_back(std::move(mt));
  }
  for (const auto& b : root.at("blobs").array())
    m.blobs.push_back(
        ManifestBlob{read_int(b.at("rank")), b.at("name").string(), b.at("bytes").u64(), read_u32(b.at("crc32c"))});
  std::sort(m.tensors.begin(), m.tensors.end(),
            [](const ManifestTensor& a, const ManifestTensor& b) { return a.name < b.name; });
  return m;
}

const ManifestTensor* Manifest::find(const std::string& name) const {
  auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                             [](const ManifestTensor& t, const std::string& n) { return t.name < n; });
  return it != tensors.end() && it->name == name ? &*it : nullptr;
}

}  // namespace tenax::ckpt
