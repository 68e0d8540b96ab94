// Internal: tenax's one JSON reader and writer, for every file tenax writes or reads as JSON — heartbeats, the
// launcher's ledger, metrics lines and summaries, checkpoint manifests. MPI-free, so that tenax-launch compiles it in.
//
// The lexing, parsing, UTF-8 checking and escaping are nlohmann-json's (Debian's nlohmann-json3-dev, header-only;
// json.cpp includes it, this header does not, so nothing that includes this header depends on it). This façade
// exists for what the callers need beyond it: nlohmann keeps the last of duplicate keys, has no nesting limit, stores
// numbers as binary values (and refuses a whole text for one beyond a double), and reports errors as its own
// exceptions; Value instead refuses duplicates, refuses deep nesting, keeps every number's literal so that 64-bit
// integers (sizes, offsets, checksums, steps) round-trip exactly and a number beyond a double is refused only by
// number(), and its strict typed accessors and the reader throw tenax's Error and ParseError, which name the value or
// the byte.
//
// Reading is strict RFC 8259: one value, nothing after it but whitespace, UTF-8 text (ill-formed UTF-8 and lone
// surrogates refused), no byte-order mark, no comments, no trailing commas, no leading zeros, no duplicate object
// keys. A record that tenax did not write, or that was damaged, is reported with the byte offset where reading
// stopped — never guessed at.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tenax/error.hpp"

namespace tenax::json {

// A value of the wrong kind or range, or a missing member. An IoError: it is a problem with data read from a file.
class Error : public IoError {
 public:
  using IoError::IoError;
};

// Text that is not JSON. offset() is the byte (0-based) where reading stopped: the byte that showed the text is not
// JSON (the end of the text when it ends too early), or, for a duplicate key and a container nested too deep, the
// start of that key or container. what() ends with "at byte N".
class ParseError : public Error {
 public:
  ParseError(const std::string& what, std::size_t offset);
  std::size_t offset() const { return offset_; }

 private:
  std::size_t offset_;
};

// Containers nested deeper than this are refused (the tree and the writer recurse; our files nest a few levels).
inline constexpr int kDefaultMaxDepth = 64;

class Value {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Value() = default;  // null

  // Parses exactly one JSON text. Throws ParseError.
  static Value parse(std::string_view text, int max_depth = kDefaultMaxDepth);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  // Where this value starts in the parsed text (bytes), and its name for messages: "member 'bytes'", "element 3",
  // or "the JSON value" for the document itself.
  std::size_t offset() const { return offset_; }
  std::string describe() const;

  // Each accessor throws Error naming this value (its key or index, and offset) when it is not what was asked for.
  bool boolean() const;
  const std::string& string() const;
  const std::vector<Value>& array() const;
  const std::vector<Value>& members() const;  // an object's members in file order; each one's key() names it
  const std::string& key() const { return key_; }
  // Numbers. u64 and i64 take integer literals only (no fraction or exponent) and refuse what does not fit; number()
  // takes any literal that a double can hold (too small a one is a zero; 1e400 is refused, not turned into infinity).
  std::uint64_t u64() const;
  std::int64_t i64() const;
  double number() const;
  const std::string& number_text() const;  // the literal as written

  // Objects. at() throws Error naming the key when it is absent; has() and find() are false / nullptr then (and for a
  // value that is not an object).
  const Value& at(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const Value* find(std::string_view key) const;

  // Optional members of an object: `fallback` when the key is absent or null, else the typed value (throws Error
  // naming the key when it has another kind).
  double number_or(std::string_view key, double fallback) const;
  std::int64_t i64_or(std::string_view key, std::int64_t fallback) const;
  std::string string_or(std::string_view key, std::string_view fallback) const;
  bool bool_or(std::string_view key, bool fallback) const;

 private:
  friend class TreeBuilder;  // json.cpp: builds the tree from nlohmann's SAX events
  [[noreturn]] void wrong(const std::string& expected) const;
  const Value* present(std::string_view key) const;  // find(), but nullptr for null members too

  Kind kind_ = Kind::Null;
  bool bool_ = false;
  std::string text_;             // String: the decoded text; Number: the literal
  std::vector<Value> children_;  // Array: the elements; Object: the members (each with its key_)
  std::string key_;              // a member's key
  bool member_ = false;          // an object's member (key_ is its name, which may be empty)
  std::int64_t index_ = -1;      // an element's index
  std::size_t offset_ = 0;
};

// ---- Writing ----

// Appends `text` as a quoted JSON string: '"' and '\' escaped, control characters as \n \t \r \b \f or \u00XX,
// well-formed UTF-8 as it is, and what is not well-formed UTF-8 as U+FFFD (written as UTF-8, EF BF BD; one for each
// byte that cannot start a character and one for each cut-off start of a character, Unicode's recommended practice),
// so that the result is always text the reader accepts (a name cut in the middle of a character, a Latin-1 file name).
void append_string(std::string& out, std::string_view text);
std::string quote(std::string_view text);

// Any value, compact (no whitespace), objects in member order, numbers as their literal: reading the result gives the
// same value back. append() recurses once per nesting level, like the reader.
void append(std::string& out, const Value& value);
std::string write(const Value& value);

// A double with the fewest digits that read back as the same double (17 significant digits at most); NaN and
// infinities, which JSON cannot hold, become null.
std::string number(double value);
// Integers exactly, in decimal.
template <std::integral T>
requires(!std::same_as<T, bool>) std::string number(T value) {
  return std::to_string(value);
}

// Builds one JSON object, members in the order added, no whitespace: {"a":1,"b":"x"}.
class ObjectWriter {
 public:
  ObjectWriter& add(std::string_view key, std::string_view value);
  ObjectWriter& add(std::string_view key, const char* value) { return add(key, std::string_view(value)); }
  ObjectWriter& add(std::string_view key, const std::string& value) { return add(key, std::string_view(value)); }
  ObjectWriter& add(std::string_view key, double value) { return add_raw(key, number(value)); }
  ObjectWriter& add(std::string_view key, bool value) { return add_raw(key, value ? "true" : "false"); }
  template <std::integral T>
  requires(!std::same_as<T, bool>) ObjectWriter& add(std::string_view key, T value) {
    return add_raw(key, number(value));
  }
  ObjectWriter& add_null(std::string_view key) { return add_raw(key, "null"); }
  // `json` must already be one JSON value (a nested object or array built elsewhere).
  ObjectWriter& add_raw(std::string_view key, std::string_view json);
  std::string str() const { return body_ + "}"; }

 private:
  std::string body_ = "{";
};

}  // namespace tenax::json
