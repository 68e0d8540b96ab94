// The shard header and the index: round trips, and every kind of damage ends in an IoError that names the file and
// says what to do.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "checkpoint/crc32c.hpp"
#include "data/byte_order.hpp"
#include "data/dataset_index.hpp"
#include "data/shard_format.hpp"
#include "data_test_util.hpp"
#include "tenax/error.hpp"

namespace tenax::test {
namespace {

using data::ShardHeader;
using ::testing::HasSubstr;

ShardHeader sample_header() {
  ShardHeader h;
  h.token_bytes = 2;
  h.vocab_size = 8192;
  h.token_count = 1000;
  h.payload_crc32c = 0xdeadbeef;
  h.split = data::SplitId::Validation;
  h.shard_number = 3;
  return h;
}

std::string parse_error(const std::string& bytes, std::uint64_t file_size) {
  try {
    data::parse_shard_header(bytes.data(), bytes.size(), file_size, "x.tok");
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

// Rewrites the header checksum after editing other header bytes (to reach the checks behind it).
void reseal(std::string& header) {
  auto* p = reinterpret_cast<unsigned char*>(header.data());
  data::store_le32(p + 60, ckpt::crc32c_extend(0, p, 60));
}

TEST(ShardHeader, RoundTrip) {
  const ShardHeader h = sample_header();
  const std::string bytes = data::encode_shard_header(h);
  ASSERT_EQ(bytes.size(), 64u);
  EXPECT_EQ(bytes.substr(0, 8), "TNXTOKSH");
  const ShardHeader back = data::parse_shard_header(bytes.data(), bytes.size(), 64 + 2000, "x.tok");
  EXPECT_EQ(back.token_count, 1000u);
  EXPECT_EQ(back.payload_crc32c, 0xdeadbeefu);
  EXPECT_EQ(back.split, data::SplitId::Validation);
  EXPECT_EQ(back.shard_number, 3u);
  EXPECT_EQ(back.payload_offset % 8, 0u);
}

TEST(ShardHeader, TokenWidthFollowsTheVocabulary) {
  EXPECT_EQ(data::token_bytes_for_vocab(65536), 2u);
  EXPECT_EQ(data::token_bytes_for_vocab(65537), 4u);
}

TEST(ShardHeader, DamageIsNamed) {
  const std::string good = data::encode_shard_header(sample_header());
  // Truncated: fewer bytes than a header, or a payload shorter than the header says.
  EXPECT_THAT(parse_error(good.substr(0, 10), 10), HasSubstr("truncated"));
  EXPECT_THAT(parse_error(good, 64 + 1999), AllOf(HasSubstr("x.tok"), HasSubstr("truncated")));
  EXPECT_THAT(parse_error(good, 64 + 2001), HasSubstr("header describes 2064"));
  std::string bad = good;
  bad[0] = 'X';
  EXPECT_THAT(parse_error(bad, 2064), HasSubstr("TNXTOKSH"));
  bad = good;
  bad[30] ^= 1;  // inside token_count, checksum not updated
  EXPECT_THAT(parse_error(bad, 2064), AllOf(HasSubstr("header checksum mismatch"), HasSubstr("tenax-data verify")));
  bad = good;
  data::store_le32(reinterpret_cast<unsigned char*>(bad.data()) + 8, 2);
  reseal(bad);
  EXPECT_THAT(parse_error(bad, 2064), HasSubstr("format version 2"));
  bad = good;
  data::store_le32(reinterpret_cast<unsigned char*>(bad.data()) + 16, 4);  // 4-byte tokens with 8192 ids
  reseal(bad);
  EXPECT_THAT(parse_error(bad, 64 + 4000), HasSubstr("token width 4"));
  bad = good;
  data::store_le64(reinterpret_cast<unsigned char*>(bad.data()) + 24, ~0ull);  // count * 2 overflows
  reseal(bad);
  EXPECT_THAT(parse_error(bad, 2064), HasSubstr("overflows"));
  bad = good;
  data::store_le64(reinterpret_cast<unsigned char*>(bad.data()) + 32, 72);
  reseal(bad);
  EXPECT_THAT(parse_error(bad, 2072), HasSubstr("payload offset 72"));
  bad = good;
  data::store_le32(reinterpret_cast<unsigned char*>(bad.data()) + 44, 2);
  reseal(bad);
  EXPECT_THAT(parse_error(bad, 2064), HasSubstr("split 2"));
}

data::DatasetIndex sample_index() {
  data::DatasetIndex x;
  x.vocab_size = 70000;
  x.token_bytes = 4;
  x.eos_id = 2;
  x.tokenizer_file = "tokenizer.model";
  x.tokenizer_bytes = 123;
  x.tokenizer_crc32c = 0xfedcba98;
  x.train.documents = 5;
  x.train.shards = {{"train-00000.tok", 100, 1}, {"train-00001.tok", 50, 2}};
  x.train.tokens = 150;
  x.validation.documents = 1;
  x.validation.shards = {{"validation-00000.tok", 9, 3}};
  x.validation.tokens = 9;
  x.source.documents = 6;
  x.source.bytes = 1000;
  x.source.validation_fraction = 0.25;
  x.source.split_seed = 17;
  x.source.label = "label with \"quotes\" and \\ and \n newline";
  return x;
}

std::string index_error(const std::string& text) {
  try {
    data::parse_index(text, "dir/index.json");
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

// Replaces `from` with `to` in an index text and recomputes the checksum, so the damage reaches the field checks.
std::string edited(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("edited: no " + from);
  text.replace(at, from.size(), to);
  const std::size_t key = text.rfind("\"index_crc32c\"");
  const std::uint32_t crc = ckpt::crc32c_extend(0, text.data(), key);
  return text.substr(0, key) + "\"index_crc32c\": " + std::to_string(crc) + "\n}\n";
}

TEST(DatasetIndex, RoundTrip) {
  data::DatasetIndex x = sample_index();
  const std::string text = data::serialize_index(x);
  const data::DatasetIndex back = data::parse_index(text, "dir/index.json");
  EXPECT_EQ(back.index_crc32c, x.index_crc32c);
  EXPECT_EQ(back.vocab_size, 70000u);
  EXPECT_EQ(back.token_bytes, 4u);
  EXPECT_EQ(back.eos_id, 2);
  EXPECT_EQ(back.tokenizer_crc32c, 0xfedcba98u);
  ASSERT_EQ(back.train.shards.size(), 2u);
  EXPECT_EQ(back.train.shards[1].file, "train-00001.tok");
  EXPECT_EQ(back.train.shards[1].tokens, 50u);
  EXPECT_EQ(back.validation.shards[0].crc32c, 3u);
  EXPECT_EQ(back.source.label, x.source.label);
  EXPECT_EQ(back.source.validation_fraction, 0.25);
}

TEST(DatasetIndex, DamageIsNamed) {
  data::DatasetIndex x = sample_index();
  const std::string text = data::serialize_index(x);
  // Any flipped byte of the body: the checksum (or the JSON parser) catches it.
  for (std::size_t i = 0; i < text.rfind("\"index_crc32c\""); i += 7) {
    std::string bad = text;
    bad[i] ^= 0x04;
    EXPECT_THAT(index_error(bad), AllOf(HasSubstr("dir/index.json"), HasSubstr("tenax-data"))) << "byte " << i;
  }
  EXPECT_THAT(index_error(text.substr(0, text.size() / 2)), HasSubstr("at byte"));  // truncated
  EXPECT_THAT(index_error(edited(text, "\"train-00001.tok\"", "\"../../etc/passwd\"")), HasSubstr("starts with '.'"));
  EXPECT_THAT(index_error(edited(text, "\"train-00001.tok\"", "\"/etc/passwd\"")),
              HasSubstr("has a character other than"));
  EXPECT_THAT(index_error(edited(text, "\"train-00001.tok\"", "\"train-00000.tok\"")), HasSubstr("used twice"));
  EXPECT_THAT(index_error(edited(text, "\"tokens\": 150", "\"tokens\": 151")), HasSubstr("its shards hold 150"));
  EXPECT_THAT(index_error(edited(text, "\"tokens\": 100", "\"tokens\": 18446744073709551615")), HasSubstr("overflow"));
  EXPECT_THAT(index_error(edited(text, "\"tokens\": 100", "\"tokens\": 0")), HasSubstr("has no tokens"));
  EXPECT_THAT(index_error(edited(text, "\"token_bytes\": 4", "\"token_bytes\": 2")),
              HasSubstr("does not match vocab_size"));
  EXPECT_THAT(index_error(edited(text, "\"eos_id\": 2", "\"eos_id\": 70000")), HasSubstr("eos_id 70000"));
  EXPECT_THAT(index_error(edited(text, "\"version\": 1", "\"version\": 2")), HasSubstr("version 2"));
  EXPECT_THAT(index_error(edited(text, "\"eos_id\": 2,", "\"eos_id\": 2, \"extra\": 1,")), HasSubstr("unknown"));
  // The checksum key spelled with an escape is not looked for anywhere else in the text.
  std::string escaped = text;
  escaped.replace(escaped.rfind("\"index_crc32c\""), 14, "\"index\\u005fcrc32c\"");
  EXPECT_THAT(index_error(escaped), HasSubstr("not written plainly"));
}

TEST(DatasetIndex, WriterRefusesWhatTheReaderWould) {
  data::DatasetIndex x = sample_index();
  x.train.shards[0].file = "sub/dir.tok";
  EXPECT_THROW(data::serialize_index(x), UsageError);
}

TEST(DatasetIndex, MissingIndexSaysWhatADatasetDirectoryIs) {
  ScratchDir dir("noindex");
  try {
    data::read_index(dir.path());
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(dir.path() + "/index.json"), HasSubstr("tenax-data encode")));
  }
}

}  // namespace
}  // namespace tenax::test
