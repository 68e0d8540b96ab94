#include "core/json.hpp"

#include <charconv>
#include <cmath>
#include <set>
#include <system_error>

namespace tenax::json {

ParseError::ParseError(const std::string& what, std::size_t offset)
    : Error(what + " at byte " + std::to_string(offset)), offset_(offset) {}

namespace {

// How a byte is shown in a message: 'x' when printable ASCII, else its hex value.
std::string show_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
  static const char* hex = "0123456789ABCDEF";
  return std::string("byte 0x") + hex[u >> 4] + hex[u & 0xf];
}

void append_utf8(std::string& out, std::uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

// The length of the well-formed UTF-8 character that starts at s[pos] (a byte >= 0x80): no overlong forms, no
// surrogates, nothing above U+10FFFF. 0 when there is none, with `problem` saying why.
std::size_t utf8_length(std::string_view s, std::size_t pos, std::string& problem) {
  const auto lead = static_cast<unsigned char>(s[pos]);
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // above U+10FFFF
  } else {
    problem = "invalid UTF-8 " + show_byte(s[pos]);
    return 0;
  }
  for (std::size_t i = 1; i < length; ++i) {
    if (pos + i >= s.size()) {
      problem = "truncated UTF-8 sequence";
      return 0;
    }
    const auto next = static_cast<unsigned char>(s[pos + i]);
    if (next < (i == 1 ? low : 0x80) || next > (i == 1 ? high : 0xBF)) {
      problem = "invalid UTF-8 sequence";
      return 0;
    }
  }
  return length;
}

// Objects with more members than this check duplicate keys with a set instead of a scan (no quadratic time).
constexpr std::size_t kLinearKeyCheck = 16;

}  // namespace

// A recursive-descent reader. Every failure throws ParseError at the offset where the problem was found.
class Parser {
 public:
  Parser(std::string_view text, int max_depth) : s_(text), max_depth_(max_depth) {}

  Value document() {
    skip_space();
    if (pos_ == s_.size()) fail("empty input: expected a JSON value");
    Value v = value(0);
    skip_space();
    if (pos_ != s_.size()) fail("unexpected " + show_byte(s_[pos_]) + " after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw ParseError(what, pos_); }
  [[noreturn]] void fail_at(std::size_t offset, const std::string& what) {
    pos_ = offset;
    fail(what);
  }
  bool at_end() const { return pos_ >= s_.size(); }
  bool is_digit() const { return !at_end() && s_[pos_] >= '0' && s_[pos_] <= '9'; }
  void skip_space() {
    while (!at_end() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  // `depth`: containers around this value.
  Value value(int depth) {
    if (at_end()) fail("unexpected end of input: expected a value");
    Value v;
    v.offset_ = pos_;
    const char c = s_[pos_];
    if (c == '{' || c == '[') {
      if (depth >= max_depth_) fail("nesting deeper than " + std::to_string(max_depth_) + " levels");
      if (c == '{') {
        object(v, depth + 1);
      } else {
        array(v, depth + 1);
      }
    } else if (c == '"') {
      v.kind_ = Value::Kind::String;
      v.text_ = string_literal();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind_ = Value::Kind::Number;
      v.text_ = number_literal();
    } else if (c == 't' || c == 'f' || c == 'n') {
      const std::string_view word = c == 't' ? "true" : c == 'f' ? "false" : "null";
      if (s_.substr(pos_, word.size()) != word) fail("invalid literal (expected '" + std::string(word) + "')");
      pos_ += word.size();
      v.kind_ = c == 'n' ? Value::Kind::Null : Value::Kind::Bool;
      v.bool_ = c == 't';
    } else {
      fail("unexpected " + show_byte(c) + ": expected a value");
    }
    return v;
  }

  void object(Value& v, int depth) {
    v.kind_ = Value::Kind::Object;
    ++pos_;  // '{'
    skip_space();
    if (!at_end() && s_[pos_] == '}') {
      ++pos_;
      return;
    }
    std::set<std::string> keys;  // filled only for large objects
    while (true) {
      skip_space();
      if (at_end()) fail("unexpected end of input inside an object");
      if (s_[pos_] == '}') fail("trailing comma before '}'");
      if (s_[pos_] != '"') fail("unexpected " + show_byte(s_[pos_]) + ": expected a string key");
      const std::size_t key_offset = pos_;
      std::string key = string_literal();
      if (is_duplicate(v.children_, keys, key)) fail_at(key_offset, "duplicate key '" + key + "'");
      skip_space();
      if (at_end() || s_[pos_] != ':') fail("expected ':' after the key '" + key + "'");
      ++pos_;
      skip_space();
      Value member = value(depth);
      member.member_ = true;
      member.key_ = std::move(key);
      v.children_.push_back(std::move(member));
      skip_space();
      if (at_end()) fail("unexpected end of input inside an object");
      if (s_[pos_] == '}') {
        ++pos_;
        return;
      }
      if (s_[pos_] != ',') fail("unexpected " + show_byte(s_[pos_]) + ": expected ',' or '}'");
      ++pos_;
    }
  }

  static bool is_duplicate(const std::vector<Value>& members, std::set<std::string>& keys, const std::string& key) {
    if (members.size() < kLinearKeyCheck) {
      for (const Value& m : members)
        if (m.key_ == key) return true;
      return false;
    }
    if (keys.empty())
      for (const Value& m : members)
        keys.insert(m.key_);
    return !keys.insert(key).second;
  }

  void array(Value& v, int depth) {
    v.kind_ = Value::Kind::Array;
    ++pos_;  // '['
    skip_space();
    if (!at_end() && s_[pos_] == ']') {
      ++pos_;
      return;
    }
    while (true) {
      skip_space();
      if (!at_end() && s_[pos_] == ']') fail("trailing comma before ']'");
      Value item = value(depth);
      item.index_ = static_cast<std::int64_t>(v.children_.size());
      v.children_.push_back(std::move(item));
      skip_space();
      if (at_end()) fail("unexpected end of input inside an array");
      if (s_[pos_] == ']') {
        ++pos_;
        return;
      }
      if (s_[pos_] != ',') fail("unexpected " + show_byte(s_[pos_]) + ": expected ',' or ']'");
      ++pos_;
    }
  }

  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, kept as written.
  std::string number_literal() {
    const std::size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    if (!at_end() && s_[pos_] == '0') {
      ++pos_;
      if (is_digit()) fail("leading zero in a number");
    } else if (is_digit()) {
      while (is_digit())
        ++pos_;
    } else {
      fail("expected a digit after '-'");
    }
    if (!at_end() && s_[pos_] == '.') {
      ++pos_;
      if (!is_digit()) fail("expected a digit after the decimal point");
      while (is_digit())
        ++pos_;
    }
    if (!at_end() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (!at_end() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!is_digit()) fail("expected a digit in the exponent");
      while (is_digit())
        ++pos_;
    }
    return std::string(s_.substr(start, pos_ - start));
  }

  std::string string_literal() {
    const std::size_t start = pos_;
    ++pos_;  // '"'
    std::string out;
    while (true) {
      if (at_end()) fail_at(start, "unterminated string");
      const auto c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c == '\\') {
        escape(out);
      } else if (c < 0x20) {
        fail("control character " + show_byte(s_[pos_]) + " inside a string (it must be escaped)");
      } else if (c < 0x80) {
        out += static_cast<char>(c);
        ++pos_;
      } else {
        utf8_sequence(out);
      }
    }
  }

  void escape(std::string& out) {
    const std::size_t start = pos_;
    ++pos_;  // '\'
    if (at_end()) fail_at(start, "unterminated escape");
    const char e = s_[pos_++];
    switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        return;
      case 'b':
        out += '\b';
        return;
      case 'f':
        out += '\f';
        return;
      case 'n':
        out += '\n';
        return;
      case 'r':
        out += '\r';
        return;
      case 't':
        out += '\t';
        return;
      case 'u':
        break;
      default:
        fail_at(start, "invalid escape '\\" + std::string(1, e) + "'");
    }
    std::uint32_t code = hex4(start);
    if (code >= 0xDC00 && code <= 0xDFFF) fail_at(start, "lone low surrogate in a \\u escape");
    if (code >= 0xD800 && code <= 0xDBFF) {
      // UTF-16 surrogate pair: the high half must be followed at once by an escaped low half.
      if (s_.substr(pos_, 2) != "\\u") fail_at(start, "high surrogate not followed by a \\u escape of a low surrogate");
      const std::size_t low_start = pos_;
      pos_ += 2;
      const std::uint32_t low = hex4(low_start);
      if (low < 0xDC00 || low > 0xDFFF)
        fail_at(low_start, "high surrogate followed by a \\u escape that is no low one");
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, code);
  }

  // The 4 hex digits after "\u" (pos_ is at the first); `escape_start` is the backslash, for the message.
  std::uint32_t hex4(std::size_t escape_start) {
    std::uint32_t code = 0;
    for (int i = 0; i < 4; ++i) {
      if (at_end()) fail_at(escape_start, "incomplete \\u escape (4 hex digits needed)");
      const char h = s_[pos_];
      int digit = h >= '0' && h <= '9'   ? h - '0'
                  : h >= 'a' && h <= 'f' ? h - 'a' + 10
                  : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                         : -1;
      if (digit < 0) fail("invalid hex digit " + show_byte(h) + " in a \\u escape");
      code = code * 16 + static_cast<std::uint32_t>(digit);
      ++pos_;
    }
    return code;
  }

  // One multi-byte UTF-8 character, checked and copied.
  void utf8_sequence(std::string& out) {
    std::string problem;
    const std::size_t length = utf8_length(s_, pos_, problem);
    if (length == 0) fail(problem);
    out.append(s_.substr(pos_, length));
    pos_ += length;
  }

  std::string_view s_;
  int max_depth_;
  std::size_t pos_ = 0;
};

Value Value::parse(std::string_view text, int max_depth) {
  return Parser(text, max_depth).document();
}

std::string Value::describe() const {
  std::string name = member_       ? "member '" + key_ + "'"
                     : index_ >= 0 ? "element " + std::to_string(index_)
                                   : "the JSON value";
  return name + " (byte " + std::to_string(offset_) + ")";
}

void Value::wrong(const std::string& expected) const {
  std::string found;
  switch (kind_) {
    case Kind::Null:
      found = "null";
      break;
    case Kind::Bool:
      found = bool_ ? "true" : "false";
      break;
    case Kind::Number:
      found = "the number " + text_;
      break;
    case Kind::String:
      found = "the string " + quote(text_.size() > 40 ? text_.substr(0, 40) + "..." : text_);
      break;
    case Kind::Array:
      found = "an array";
      break;
    case Kind::Object:
      found = "an object";
      break;
  }
  throw Error(describe() + ": expected " + expected + ", found " + found);
}

bool Value::boolean() const {
  if (kind_ != Kind::Bool) wrong("true or false");
  return bool_;
}

const std::string& Value::string() const {
  if (kind_ != Kind::String) wrong("a string");
  return text_;
}

const std::vector<Value>& Value::array() const {
  if (kind_ != Kind::Array) wrong("an array");
  return children_;
}

const std::vector<Value>& Value::members() const {
  if (kind_ != Kind::Object) wrong("an object");
  return children_;
}

std::uint64_t Value::u64() const {
  std::uint64_t v = 0;
  if (kind_ != Kind::Number) wrong("an unsigned 64-bit integer");
  auto [end, error] = std::from_chars(text_.data(), text_.data() + text_.size(), v);
  if (error != std::errc() || end != text_.data() + text_.size()) wrong("an unsigned 64-bit integer");
  return v;
}

std::int64_t Value::i64() const {
  std::int64_t v = 0;
  if (kind_ != Kind::Number) wrong("a 64-bit integer");
  auto [end, error] = std::from_chars(text_.data(), text_.data() + text_.size(), v);
  if (error != std::errc() || end != text_.data() + text_.size()) wrong("a 64-bit integer");
  return v;
}

double Value::number() const {
  if (kind_ != Kind::Number) wrong("a number");
  double v = 0;
  auto [end, error] = std::from_chars(text_.data(), text_.data() + text_.size(), v);
  if (error == std::errc::result_out_of_range) {
    // Too small for a double is zero (of the literal's sign); too large has no value to give.
    const auto e = text_.find_first_of("eE");
    if (e != std::string::npos && text_[e + 1] == '-') return text_[0] == '-' ? -0.0 : 0.0;
    wrong("a number within the range of a double");
  }
  if (error != std::errc() || end != text_.data() + text_.size()) wrong("a number");
  return v;
}

const std::string& Value::number_text() const {
  if (kind_ != Kind::Number) wrong("a number");
  return text_;
}

const Value* Value::find(std::string_view key) const {
  if (kind_ != Kind::Object) return nullptr;
  for (const Value& m : children_)
    if (m.key_ == key) return &m;
  return nullptr;
}

const Value& Value::at(std::string_view key) const {
  if (kind_ != Kind::Object) wrong("an object holding '" + std::string(key) + "'");
  if (const Value* m = find(key)) return *m;
  throw Error(describe() + ": missing member '" + std::string(key) + "'");
}

const Value* Value::present(std::string_view key) const {
  if (kind_ != Kind::Object) wrong("an object holding '" + std::string(key) + "'");
  const Value* m = find(key);
  return m != nullptr && !m->is_null() ? m : nullptr;
}

double Value::number_or(std::string_view key, double fallback) const {
  const Value* m = present(key);
  return m != nullptr ? m->number() : fallback;
}

std::int64_t Value::i64_or(std::string_view key, std::int64_t fallback) const {
  const Value* m = present(key);
  return m != nullptr ? m->i64() : fallback;
}

std::string Value::string_or(std::string_view key, std::string_view fallback) const {
  const Value* m = present(key);
  return m != nullptr ? m->string() : std::string(fallback);
}

void append_string(std::string& out, std::string_view text) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      // Valid UTF-8 as it is; any other byte as U+FFFD, so that what is written is always JSON the reader takes.
      std::string problem;
      const std::size_t length = utf8_length(text, i, problem);
      if (length == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (u < 0x20) {
          out += "\\u00";
          out += hex[(u >> 4) & 0xf];
          out += hex[u & 0xf];
        } else {
          out += c;
        }
    }
    ++i;
  }
  out += '"';
}

std::string quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  append_string(out, text);
  return out;
}

std::string number(double value) {
  if (!std::isfinite(value)) return "null";
  char buffer[32];
  // The shortest form that reads back as the same double (std::to_chars without a precision).
  auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, error == std::errc() ? end : buffer);
}

void append(std::string& out, const Value& value) {
  switch (value.kind()) {
    case Value::Kind::Null:
      out += "null";
      return;
    case Value::Kind::Bool:
      out += value.boolean() ? "true" : "false";
      return;
    case Value::Kind::Number:
      out += value.number_text();  // the literal as read: exact, whatever its size
      return;
    case Value::Kind::String:
      append_string(out, value.string());
      return;
    case Value::Kind::Array: {
      out += '[';
      bool first = true;
      for (const Value& element : value.array()) {
        if (!first) out += ',';
        first = false;
        append(out, element);
      }
      out += ']';
      return;
    }
    case Value::Kind::Object: {
      out += '{';
      bool first = true;
      for (const Value& member : value.members()) {
        if (!first) out += ',';
        first = false;
        append_string(out, member.key());
        out += ':';
        append(out, member);
      }
      out += '}';
      return;
    }
  }
}

std::string write(const Value& value) {
  std::string out;
  append(out, value);
  return out;
}

ObjectWriter& ObjectWriter::add(std::string_view key, std::string_view value) {
  std::string quoted;
  append_string(quoted, value);
  return add_raw(key, quoted);
}

ObjectWriter& ObjectWriter::add_raw(std::string_view key, std::string_view json) {
  if (body_.size() > 1) body_ += ',';
  append_string(body_, key);
  body_ += ':';
  body_ += json;
  return *this;
}

}  // namespace tenax::json
