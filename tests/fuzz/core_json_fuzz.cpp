// core/json (runtime/src/core/json.*): the strict reader every tenax file goes through (heartbeats, ledger, metrics,
// checkpoint manifests), and the writer.
//
// Properties: parsing arbitrary bytes returns a value or throws ParseError (never anything else, never a crash or a
// sanitizer report); a parsed value written back with json::write() parses again to the same value and the same text
// (round trip); the typed accessors refuse with json::Error what they cannot represent; and any bytes quoted by the
// writer are text the reader accepts. The whole input is parsed, as the real callers parse whole files and lines.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/json.hpp"

namespace {

using tenax::json::Value;

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "core_json_fuzz: %s\n", what);
  std::abort();
}

bool same(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Null:
      return true;
    case Value::Kind::Bool:
      return a.boolean() == b.boolean();
    case Value::Kind::Number:
      return a.number_text() == b.number_text();
    case Value::Kind::String:
      return a.string() == b.string();
    case Value::Kind::Array:
    case Value::Kind::Object: {
      const auto& x = a.kind() == Value::Kind::Array ? a.array() : a.members();
      const auto& y = b.kind() == Value::Kind::Array ? b.array() : b.members();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i)
        if (x[i].key() != y[i].key() || !same(x[i], y[i])) return false;
      return true;
    }
  }
  return false;
}

// Every accessor on every value: each returns or throws json::Error.
void touch(const Value& v) {
  (void)v.describe();
  try {
    (void)v.u64();
  } catch (const tenax::json::Error&) {
  }
  try {
    (void)v.i64();
  } catch (const tenax::json::Error&) {
  }
  try {
    (void)v.number();
  } catch (const tenax::json::Error&) {
  }
  try {
    (void)v.string_or("v", "");
    (void)v.number_or("n", 0);
    (void)v.i64_or("i", 0);
    (void)v.at("k");
  } catch (const tenax::json::Error&) {
  }
  if (v.kind() == Value::Kind::Array)
    for (const Value& child : v.array())
      touch(child);
  if (v.kind() == Value::Kind::Object)
    for (const Value& child : v.members())
      touch(child);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // The writer: any bytes, quoted, read back (bytes that are not UTF-8 as U+FFFD); what was read back is valid UTF-8
  // and round-trips exactly.
  try {
    const std::string back = Value::parse(tenax::json::quote(text)).string();
    if (Value::parse(tenax::json::quote(back)).string() != back) bug("quoted text does not round-trip");
  } catch (const tenax::json::ParseError&) {
    bug("the reader refused a string the writer quoted");
  }

  Value value;
  try {
    value = Value::parse(text);
  } catch (const tenax::json::ParseError& error) {
    if (error.offset() > size) bug("parse error offset past the end of the input");
    return 0;
  }
  touch(value);
  const std::string written = tenax::json::write(value);
  Value again;
  try {
    again = Value::parse(written);
  } catch (const tenax::json::ParseError&) {
    bug("the reader refused what the writer wrote for a parsed value");
  }
  if (!same(value, again)) bug("parse(write(v)) differs from v");
  if (tenax::json::write(again) != written) bug("write(parse(write(v))) differs from write(v)");
  return 0;
}
