// core/json: the strict RFC 8259 reader and the writer every tenax file format goes through.
#include "core/json.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>

namespace tenax::json {
namespace {

using Kind = Value::Kind;

// The offset a malformed text is reported at (-1 when it parses).
long long error_offset(std::string_view text, int max_depth = kDefaultMaxDepth) {
  try {
    Value::parse(text, max_depth);
    return -1;
  } catch (const ParseError& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("at byte " + std::to_string(error.offset())), std::string::npos) << what;
    return static_cast<long long>(error.offset());
  }
}

TEST(Json, ParsesEveryKindKeepingObjectOrder) {
  const Value v = Value::parse(R"( {"z": null, "b": true, "a": [1, -2.5e3, "x", {}, []], "f": false} )");
  ASSERT_EQ(v.kind(), Kind::Object);
  const auto& members = v.members();
  ASSERT_EQ(members.size(), 4u);
  EXPECT_EQ(members[0].key(), "z");
  EXPECT_EQ(members[1].key(), "b");
  EXPECT_EQ(members[2].key(), "a");
  EXPECT_EQ(members[3].key(), "f");
  EXPECT_TRUE(v.at("z").is_null());
  EXPECT_TRUE(v.at("b").boolean());
  EXPECT_FALSE(v.at("f").boolean());
  const auto& a = v.at("a").array();
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[0].u64(), 1u);
  EXPECT_EQ(a[1].number(), -2500.0);
  EXPECT_EQ(a[1].number_text(), "-2.5e3");
  EXPECT_EQ(a[2].string(), "x");
  EXPECT_EQ(a[3].kind(), Kind::Object);
  EXPECT_TRUE(a[4].array().empty());
  EXPECT_TRUE(v.has("a"));
  EXPECT_FALSE(v.has("missing"));
  EXPECT_EQ(v.find("missing"), nullptr);
  EXPECT_FALSE(a[0].has("a")) << "has() of a value that is not an object is false";
}

TEST(Json, ScalarsAtTheTopLevelAreDocumentsToo) {
  EXPECT_EQ(Value::parse("42").u64(), 42u);
  EXPECT_EQ(Value::parse("\"s\"").string(), "s");
  EXPECT_TRUE(Value::parse(" null ").is_null());
}

TEST(Json, DecodesEveryEscape) {
  const Value v = Value::parse(R"("q\" b\\ s\/ \b\f\n\r\t \u0041\u00e9\u20ac \u0000end")");
  EXPECT_EQ(v.string(), std::string("q\" b\\ s/ \b\f\n\r\t A\xC3\xA9\xE2\x82\xAC ") + std::string(1, '\0') + "end");
}

TEST(Json, CombinesSurrogatePairsAndRefusesLoneHalves) {
  // U+1F600 (grinning face) and U+10FFFF, the last code point, in both hex cases.
  EXPECT_EQ(Value::parse(R"("\ud83d\ude00")").string(), "\xF0\x9F\x98\x80");
  EXPECT_EQ(Value::parse(R"("\uDBFF\uDFFF")").string(), "\xF4\x8F\xBF\xBF");
  // Each refused where reading stopped: the byte that showed the escape to be wrong.
  EXPECT_EQ(error_offset(R"("ab\ud83d")"), 9);         // high half at the end of the string: the quote
  EXPECT_EQ(error_offset(R"("ab\ud83dxy")"), 9);       // high half followed by text: the 'x'
  EXPECT_EQ(error_offset(R"("ab\ud83d\u0041")"), 14);  // high half followed by an escape that is no low half
  EXPECT_EQ(error_offset(R"("ab\ude00")"), 8);         // low half alone: its last hex digit
  EXPECT_EQ(error_offset(R"("\u12")"), 5);             // short escape: the quote is no hex digit
  EXPECT_EQ(error_offset(R"("\u12)"), 5);              // short escape at the end of the text
  EXPECT_EQ(error_offset(R"("\u12G4")"), 5);           // bad hex digit
}

TEST(Json, ChecksRawUtf8) {
  EXPECT_EQ(Value::parse("\"n\xC3\xA9 \xF0\x9F\x98\x80\"").string(), "n\xC3\xA9 \xF0\x9F\x98\x80");
  // Each refused at the first byte that cannot be part of a well-formed character there.
  EXPECT_EQ(error_offset("\"a\xC3\""), 3);              // truncated sequence: the quote is no continuation byte
  EXPECT_EQ(error_offset("\"a\xC0\xAF\""), 2);          // overlong '/': C0 starts no character
  EXPECT_EQ(error_offset("\"a\xED\xA0\x80\""), 3);      // an encoded surrogate: A0 cannot follow ED
  EXPECT_EQ(error_offset("\"a\xF4\x90\x80\x80\""), 3);  // above U+10FFFF: 90 cannot follow F4
  EXPECT_EQ(error_offset("\"a\xFF\""), 2);
}

TEST(Json, KeepsBigIntegersExact) {
  const Value v = Value::parse(
      R"({"max_u64": 18446744073709551615, "max_i64": 9223372036854775807, "min_i64": -9223372036854775808,
          "odd": 9007199254740993, "over": 18446744073709551616, "neg": -1, "frac": 1.0, "exp": 1e3})");
  EXPECT_EQ(v.at("max_u64").u64(), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(v.at("max_i64").i64(), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(v.at("min_i64").i64(), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(v.at("odd").u64(), 9007199254740993u);  // 2^53 + 1: a double would round it
  EXPECT_EQ(v.at("odd").number_text(), "9007199254740993");
  EXPECT_THROW(v.at("over").u64(), Error);
  EXPECT_THROW(v.at("max_u64").i64(), Error);
  EXPECT_THROW(v.at("neg").u64(), Error);
  EXPECT_EQ(v.at("neg").i64(), -1);
  EXPECT_THROW(v.at("frac").u64(), Error) << "integers are integer literals";
  EXPECT_THROW(v.at("exp").i64(), Error);
  EXPECT_EQ(v.at("exp").number(), 1000.0);
}

TEST(Json, NumbersOutsideADoubleAreRefusedOrUnderflowToZero) {
  EXPECT_THROW(Value::parse("1e400").number(), Error);
  EXPECT_THROW(Value::parse("-1e400").number(), Error);
  // Only number() refuses them: the text reads, the literal is kept, and so are the values after it.
  const Value v = Value::parse(R"({"a": [1, -1e400, 2E+999], "b": "x", "c": 1e400})");
  EXPECT_EQ(v.at("a").array()[1].number_text(), "-1e400");
  EXPECT_EQ(v.at("a").array()[1].offset(), 10u);
  EXPECT_EQ(v.at("a").array()[2].number_text(), "2E+999");
  EXPECT_THROW(v.at("a").array()[2].number(), Error);
  EXPECT_THROW(v.at("c").u64(), Error);
  EXPECT_EQ(v.at("b").string(), "x");
  EXPECT_EQ(write(v), R"({"a":[1,-1e400,2E+999],"b":"x","c":1e400})");
  EXPECT_EQ(error_offset("[1e400, 1e400 x]"), 14) << "an error after such a number is still found where it is";
  // Each one costs a reading of the text: more than 16 are refused (at the 17th).
  std::string many = "[";
  for (int i = 0; i < 17; ++i)
    many += "1e999,";
  EXPECT_EQ(Value::parse(many.substr(0, 6 * 16) + "]").array().size(), 16u);
  EXPECT_EQ(error_offset(many.substr(0, many.size() - 1) + "]"), 1 + 6 * 16);
  EXPECT_EQ(Value::parse("1e-400").number(), 0.0);
  EXPECT_TRUE(std::signbit(Value::parse("-1e-400").number()));
  EXPECT_EQ(Value::parse("-0").number(), 0.0);
  // Minus zero keeps its sign, as an integer literal and as a fraction.
  EXPECT_TRUE(std::signbit(Value::parse("-0").number()));
  EXPECT_EQ(write(Value::parse("[-0,0,-0.0]")), "[-0,0,-0.0]");
  EXPECT_EQ(Value::parse("-0").i64(), 0);
}

// Each malformed text and the byte where the problem is.
TEST(Json, RejectsMalformedTextAtTheRightOffset) {
  const std::pair<const char*, long long> cases[] = {
      {"", 0},                   // nothing
      {"   ", 3},                // only whitespace
      {"{", 1},                  // unterminated object
      {"{\"a\":1", 6},           // no closing brace
      {"{\"a\" 1}", 5},          // no colon
      {"{a:1}", 1},              // unquoted key
      {"{\"a\":1,}", 7},         // trailing comma in an object
      {"[1,2,]", 5},             // trailing comma in an array
      {"[1 2]", 3},              // missing comma
      {"{\"a\":01}", 6},         // leading zero
      {"{\"a\":-}", 6},          // minus without digits
      {"{\"a\":1.}", 7},         // no fraction digits
      {"{\"a\":1e}", 7},         // no exponent digits
      {"{\"a\":+1}", 5},         // plus sign
      {"{\"a\":.5}", 5},         // no integer part
      {"{\"a\":tru}", 8},        // bad literal: the '}' where 'e' should be
      {"{\"a\":True}", 5},       // case matters
      {"{\"a\":NaN}", 5},        // not JSON
      {"{\"a\":\"x}", 8},        // unterminated string: the end of the text
      {"{\"a\":\"x\ty\"}", 7},   // raw control character
      {"{\"a\":\"\\x\"}", 7},    // invalid escape: the 'x'
      {"{\"a\":1} x", 8},        // trailing text
      {"{\"a\":1}{}", 7},        // two documents
      {"[1] // comment", 4},     // comments are not JSON
      {"{\"a\":1,\"a\":2}", 7},  // duplicate key
      {"\xEF\xBB\xBF{}", 0},     // byte-order mark
  };
  for (const auto& [text, offset] : cases)
    EXPECT_EQ(error_offset(text), offset) << "text: " << text;
}

TEST(Json, DuplicateKeysAreFoundInLargeObjectsToo) {
  std::string text = "{";
  for (int i = 0; i < 100; ++i)
    text += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  EXPECT_EQ(Value::parse(text.substr(0, text.size() - 1) + "}").members().size(), 100u);
  const std::string duplicate = text + "\"k57\":0}";
  EXPECT_EQ(error_offset(duplicate), static_cast<long long>(text.size()));
}

TEST(Json, DuplicateKeysAreRefusedInEachObjectNotAcrossObjects) {
  EXPECT_EQ(Value::parse(R"({"k":{"k":1},"j":{"k":2},"l":[{"k":3},{"k":4}]})").members().size(), 3u);
  EXPECT_EQ(error_offset(R"({"a":{"k":1,"k":2}})"), 12);  // nested: the second "k"
  EXPECT_EQ(error_offset(R"({"k":{"x":1},"k":2})"), 13);  // after a nested object
  EXPECT_EQ(error_offset(R"({"k":1 , "k":2})"), 9);       // whitespace before the key
  EXPECT_EQ(error_offset(R"({"\u006b":1,"k":2})"), 12);   // the same key, escaped differently
  try {
    Value::parse(R"({"a":1,"a":2})");
    FAIL() << "expected a ParseError";
  } catch (const ParseError& error) {
    EXPECT_STREQ(error.what(), "duplicate key 'a' at byte 7");
  }
}

// Every value's offset is where it starts, whatever came before it: numbers (which the reader reads one byte past),
// closing brackets, whitespace.
TEST(Json, ValuesKnowWhereTheyStart) {
  const Value v = Value::parse("[1 , 22,\n333,[4],{\"k\":-5.5e1},\"s\" ,true,null]");
  const auto& a = v.array();
  const std::size_t expected[] = {1, 5, 9, 13, 17, 30, 35, 40};
  ASSERT_EQ(a.size(), std::size(expected));
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i].offset(), expected[i]) << a[i].describe();
  EXPECT_EQ(a[4].at("k").offset(), 22u);
  EXPECT_EQ(v.offset(), 0u);
  EXPECT_EQ(Value::parse("  \n 7 ").offset(), 4u);
}

// The message quotes what was read, cut short: an unterminated string is the rest of the text.
TEST(Json, ParseErrorMessagesStayShort) {
  const std::string text = "{\"a\":\"" + std::string(1 << 20, 'x');
  try {
    Value::parse(text);
    FAIL() << "expected a ParseError";
  } catch (const ParseError& error) {
    EXPECT_EQ(error.offset(), text.size());
    EXPECT_LT(std::strlen(error.what()), 300u) << error.what();
  }
}

TEST(Json, NestingDeeperThanTheLimitIsRefused) {
  auto nested = [](int depth) {
    return std::string(static_cast<std::size_t>(depth), '[') + std::string(static_cast<std::size_t>(depth), ']');
  };
  EXPECT_EQ(error_offset(nested(kDefaultMaxDepth)), -1);
  EXPECT_EQ(error_offset(nested(kDefaultMaxDepth + 1)), kDefaultMaxDepth);  // the first bracket too many
  EXPECT_EQ(error_offset(nested(3), 3), -1);
  EXPECT_EQ(error_offset("{\"a\":{\"b\":[1]}}", 2), 10);
  // Far beyond the limit: refused at the limit, without exhausting the stack.
  EXPECT_EQ(error_offset(std::string(1000000, '[')), kDefaultMaxDepth);
  std::string objects;
  for (int i = 0; i < 100000; ++i)
    objects += "{\"a\":";
  EXPECT_EQ(error_offset(objects), 5 * kDefaultMaxDepth);
  // The limit is on nesting, not on the number of containers.
  EXPECT_EQ(error_offset("[[1],[2],{\"a\":[]},[[]]]", 3), -1);
  EXPECT_EQ(error_offset("[[1],[2],{\"a\":[]},[[[]]]]", 3), 20);
  try {
    Value::parse(nested(kDefaultMaxDepth + 1));
  } catch (const ParseError& error) {
    EXPECT_NE(std::string(error.what()).find("nesting deeper than 64 levels"), std::string::npos) << error.what();
  }
}

TEST(Json, ParseErrorsAreIoErrorsThatSayWhatIsWrong) {
  try {
    Value::parse("{\"a\":1,}");
    FAIL() << "expected a ParseError";
  } catch (const IoError& error) {
    EXPECT_STREQ(error.what(),
                 "syntax error while parsing object key - unexpected '}'; expected string literal at byte 7");
  }
}

TEST(Json, AccessorsNameTheKeyOrIndexTheyFailOn) {
  const Value v = Value::parse(R"({"bytes": -1, "name": 7, "list": [1, "two"]})");
  auto message = [](auto&& read) -> std::string {
    try {
      read();
    } catch (const Error& error) {
      return error.what();
    }
    return "no error";
  };
  EXPECT_EQ(message([&] { v.at("bytes").u64(); }),
            "member 'bytes' (byte 10): expected an unsigned 64-bit integer, found the number -1");
  EXPECT_EQ(message([&] { v.at("name").string(); }), "member 'name' (byte 22): expected a string, found the number 7");
  EXPECT_EQ(message([&] { v.at("list").array()[1].u64(); }),
            "element 1 (byte 37): expected an unsigned 64-bit integer, found the string \"two\"");
  EXPECT_EQ(message([&] { v.at("absent"); }), "the JSON value (byte 0): missing member 'absent'");
  EXPECT_EQ(message([&] { v.at("list").at("x"); }),
            "member 'list' (byte 33): expected an object holding 'x', found an array");
  EXPECT_EQ(message([&] { v.boolean(); }), "the JSON value (byte 0): expected true or false, found an object");
}

TEST(Json, OptionalMembersFallBackOnlyWhenAbsentOrNull) {
  const Value v = Value::parse(R"({"n": 2.5, "i": -7, "s": "x", "z": null, "wrong": "3"})");
  EXPECT_EQ(v.number_or("n", 0), 2.5);
  EXPECT_EQ(v.number_or("absent", -1), -1);
  EXPECT_EQ(v.number_or("z", -1), -1);
  EXPECT_EQ(v.i64_or("i", 0), -7);
  EXPECT_EQ(v.i64_or("absent", 3), 3);
  EXPECT_EQ(v.string_or("s", ""), "x");
  EXPECT_EQ(v.string_or("z", "none"), "none");
  EXPECT_THROW(v.number_or("wrong", 0), Error);
  EXPECT_THROW(v.i64_or("n", 0), Error);
  EXPECT_THROW(Value::parse("[1]").number_or("n", 0), Error);
}

TEST(Json, QuotesEveryCharacterThatNeedsIt) {
  EXPECT_EQ(quote("a\"b\\c\n\t\r\b\f\x01\x1f/\x7f"), "\"a\\\"b\\\\c\\n\\t\\r\\b\\f\\u0001\\u001f/\x7f\"");
  EXPECT_EQ(quote("n\xC3\xA9"), "\"n\xC3\xA9\"");  // UTF-8 as it is
  std::string out = "x=";
  append_string(out, "y");
  EXPECT_EQ(out, "x=\"y\"");
}

// The writer never produces text the reader refuses: bytes that are not UTF-8 (a host name cut in the middle of a
// character, a Latin-1 file name in a command line) become U+FFFD, written as UTF-8 (EF BF BD), once for each byte
// that starts no character and once for each cut-off start of a character; valid UTF-8 stays as it is.
TEST(Json, QuotedTextIsValidJsonWhateverTheBytes) {
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(quote("a\xFF"
                  "b"),
            "\"a" + r + "b\"");
  EXPECT_EQ(quote("\xC3"), "\"" + r + "\"");                              // truncated at the end
  EXPECT_EQ(quote("\xC3\xA9\xC3x"), "\"\xC3\xA9" + r + "x\"");            // truncated before an ASCII byte
  EXPECT_EQ(quote("\xE2\x82x"), "\"" + r + "x\"");                        // a cut-off 3-byte start: one U+FFFD
  EXPECT_EQ(quote("\xE2\x82\xE2\x82\xAC"), "\"" + r + "\xE2\x82\xAC\"");  // ... then a whole character
  EXPECT_EQ(quote("\xC0\xAF"), "\"" + r + r + "\"");                      // overlong
  EXPECT_EQ(quote("\xED\xA0\x80"), "\"" + r + r + r + "\"");              // an encoded surrogate
  EXPECT_EQ(quote("\xF4\x90\x80\x80"), "\"" + r + r + r + r + "\"");      // above U+10FFFF
  EXPECT_EQ(quote("\xF0\x9F\x98\x80"), "\"\xF0\x9F\x98\x80\"");
  EXPECT_EQ(Value::parse(quote("\xFF")).string(), "\xEF\xBF\xBD");
  std::mt19937 rng(11);
  for (int i = 0; i < 20000; ++i) {
    std::string bytes;
    const int length = static_cast<int>(rng() % 12);
    for (int j = 0; j < length; ++j)
      bytes += static_cast<char>(rng() % 256);
    const std::string text = quote(bytes);
    ASSERT_NO_THROW(Value::parse(text)) << text;
  }
}

// Any parsed value written back reads as the same value (numbers keep their literal).
TEST(Json, WriteOfAParsedValueReadsBackTheSame) {
  const std::string text =
      " {\"a\" : [1, -0.5e+10, 18446744073709551616, true, false, null, \"\\u00e9\\n\\ud83d\\ude00\"],\n"
      "  \"\" : {}, \"b\" : [], \"c\" : {\"d\" : [[[]]], \"\\u0000\" : \"x\"}}";
  const Value first = Value::parse(text);
  const std::string written = write(first);
  EXPECT_EQ(written,
            "{\"a\":[1,-0.5e+10,18446744073709551616,true,false,null,\"\xC3\xA9\\n\xF0\x9F\x98\x80\"],\"\":{},\"b\":[],"
            "\"c\":{\"d\":[[[]]],\"\\u0000\":\"x\"}}");
  EXPECT_EQ(write(Value::parse(written)), written);
  EXPECT_EQ(write(Value()), "null");
  EXPECT_EQ(write(Value::parse("\"s\"")), "\"s\"");
}

TEST(Json, NumbersRoundTripExactly) {
  EXPECT_EQ(number(0.25), "0.25");
  EXPECT_EQ(number(0.1), "0.1");
  EXPECT_EQ(number(1.0), "1");
  EXPECT_EQ(number(-0.0), "-0");
  EXPECT_EQ(number(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(number(-std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(number(std::nan("")), "null");
  EXPECT_EQ(number(std::int64_t{-9223372036854775807 - 1}), "-9223372036854775808");
  EXPECT_EQ(number(std::uint64_t{18446744073709551615u}), "18446744073709551615");
  EXPECT_EQ(number(7), "7");
  std::mt19937_64 rng(20261122);
  for (int i = 0; i < 20000; ++i) {
    std::uint64_t bits = rng();
    double value;
    std::memcpy(&value, &bits, sizeof value);
    if (!std::isfinite(value)) continue;
    const std::string text = number(value);
    EXPECT_LE(text.size(), 24u) << text;
    const double back = Value::parse(text).number();
    ASSERT_EQ(std::memcmp(&back, &value, sizeof value), 0) << text;
  }
}

TEST(Json, ObjectWriterOutputReadsBackTheSame) {
  const std::string text = ObjectWriter()
                               .add("s", "a \"quoted\"\tvalue\\")
                               .add("i", 42)
                               .add("ll", -9007199254740993LL)
                               .add("u", std::uint64_t{18446744073709551615u})
                               .add("d", -1.5)
                               .add("inf", std::numeric_limits<double>::infinity())
                               .add("b", true)
                               .add_null("n")
                               .add_raw("nested", "[1,{\"x\":2}]")
                               .str();
  EXPECT_EQ(text.find(' '), text.find(" \\\"quoted"));  // no whitespace but inside the string
  const Value v = Value::parse(text);
  EXPECT_EQ(v.members().size(), 9u);
  EXPECT_EQ(v.at("s").string(), "a \"quoted\"\tvalue\\");
  EXPECT_EQ(v.at("i").i64(), 42);
  EXPECT_EQ(v.at("ll").i64(), -9007199254740993LL);
  EXPECT_EQ(v.at("u").u64(), 18446744073709551615u);
  EXPECT_EQ(v.at("d").number(), -1.5);
  EXPECT_TRUE(v.at("inf").is_null());
  EXPECT_TRUE(v.at("b").boolean());
  EXPECT_TRUE(v.at("n").is_null());
  EXPECT_EQ(v.at("nested").array()[1].at("x").u64(), 2u);
  EXPECT_EQ(ObjectWriter().str(), "{}");
}

// Random bytes never crash the reader; it either returns a value or throws ParseError.
TEST(Json, ArbitraryBytesNeverCrashTheReader) {
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]:,\"\\u0123456789abcdefE.-+ tnrl\xC3\xA9\xF0";
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    const int length = static_cast<int>(rng() % 24);
    for (int j = 0; j < length; ++j)
      text += alphabet[rng() % alphabet.size()];
    try {
      Value::parse(text);
    } catch (const ParseError& error) {
      EXPECT_LE(error.offset(), text.size());
    }
  }
}

}  // namespace
}  // namespace tenax::json
