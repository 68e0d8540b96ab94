// Token dataset indexes (index.json) are read from shared storage that may be damaged or written by someone else:
// parsing and validating any bytes must end in an index or a tenax::IoError naming the problem, never a crash, a
// sanitizer report, an unbounded allocation or another exception. TokenDataset, staging and tenax-data read an index
// of at most kIndexMaxBytes; larger inputs are cut off here as they are refused there. An index that passes is
// written back and must read back with the same contents. A CRC32C is no protection against someone who writes an
// index on purpose, and random bytes almost never match it: each input is also tried with its checksum recomputed,
// so that the field checks behind the checksum are fuzzed too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "checkpoint/crc32c.hpp"
#include "data/dataset_index.hpp"
#include "tenax/error.hpp"

namespace {

bool same_split(const tenax::data::SplitIndex& a, const tenax::data::SplitIndex& b) {
  if (a.documents != b.documents || a.tokens != b.tokens || a.shards.size() != b.shards.size()) return false;
  for (std::size_t i = 0; i < a.shards.size(); ++i)
    if (a.shards[i].file != b.shards[i].file || a.shards[i].tokens != b.shards[i].tokens ||
        a.shards[i].crc32c != b.shards[i].crc32c)
      return false;
  return true;
}

void check(std::string_view text) {
  tenax::data::DatasetIndex x;
  try {
    x = tenax::data::parse_index(text, "fuzz/index.json");
  } catch (const tenax::IoError&) {
    return;  // refused with a message: what must happen to damaged input
  }
  tenax::data::DatasetIndex copy = x;
  const std::string again = tenax::data::serialize_index(copy);  // must not throw: it passed the same rules
  const tenax::data::DatasetIndex back = tenax::data::parse_index(again, "fuzz/again.json");
  if (back.vocab_size != x.vocab_size || back.token_bytes != x.token_bytes || back.eos_id != x.eos_id ||
      back.tokenizer_file != x.tokenizer_file || back.tokenizer_bytes != x.tokenizer_bytes ||
      back.tokenizer_crc32c != x.tokenizer_crc32c || back.source.label != x.source.label ||
      !same_split(back.train, x.train) || !same_split(back.validation, x.validation))
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > tenax::data::kIndexMaxBytes) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check(text);
  // The same text with a valid checksum: "index_crc32c": <CRC32C of everything before the key>, then the rest.
  const std::string key = "\"index_crc32c\"";
  const std::size_t at = text.rfind(key);
  if (at != std::string_view::npos) {
    const std::uint32_t crc = tenax::ckpt::crc32c_extend(0, text.data(), at);
    std::size_t tail = at + key.size();
    while (tail < text.size() && (text[tail] == ':' || text[tail] == ' ' || (text[tail] >= '0' && text[tail] <= '9')))
      ++tail;
    check(std::string(text.substr(0, at)) + key + ": " + std::to_string(crc) + std::string(text.substr(tail)));
  }
  return 0;
}
