// Writes the datasets the independent Python reader (read_shards_test.py) checks: for each token width, a dataset of
// pseudo-random tokens in several shards, and next to it expected_<split>.i32, the same tokens as raw little-endian
// int32 (written here directly, not through the shard writer).
//   tenax_data_write_fixture OUT_DIR
#include <cstdio>
#include <fstream>
#include <vector>

#include "data/dataset_writer.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 64;
  }
  const std::string out = argv[1];
  struct Case {
    const char* name;
    std::uint32_t vocab;
  };
  for (const Case c : {Case{"u16", 50257}, Case{"u32", 200003}}) {
    const std::string dir = out + "/" + c.name;
    tenax::data::DatasetWriter w(dir, c.vocab, 7, 10007);
    std::uint64_t x = 0x243f6a8885a308d3ull;
    for (int split = 0; split < 2; ++split) {
      const auto id = split ? tenax::data::SplitId::Validation : tenax::data::SplitId::Train;
      std::vector<std::int32_t> expected;
      for (int doc = 0; doc < (split ? 3 : 11); ++doc) {
        std::vector<std::int32_t> tokens(static_cast<std::size_t>(1000 + doc * 997));
        for (auto& t : tokens) {
          x ^= x << 13;
          x ^= x >> 7;
          x ^= x << 17;
          t = static_cast<std::int32_t>(x % c.vocab);
        }
        w.append(id, tokens);
        w.end_document(id);
        expected.insert(expected.end(), tokens.begin(), tokens.end());
        expected.push_back(7);
      }
      std::ofstream raw(out + "/" + c.name + "_expected_" + (split ? "validation" : "train") + ".i32",
                        std::ios::binary);
      for (std::int32_t t : expected) {
        const unsigned char b[4] = {static_cast<unsigned char>(t), static_cast<unsigned char>(t >> 8),
                                    static_cast<unsigned char>(t >> 16), static_cast<unsigned char>(t >> 24)};
        raw.write(reinterpret_cast<const char*>(b), 4);
      }
    }
    w.set_tokenizer("tokenizer bytes for the checksum");
    w.commit();
  }
  return 0;
}
