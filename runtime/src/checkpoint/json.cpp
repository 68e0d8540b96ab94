#include "checkpoint/json.hpp"

#include <stdexcept>

namespace tenax::ckpt::json {

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Value document() {
    Value v = value(0);
    skip_space();
    if (pos_ != s_.size()) fail("trailing characters after the document");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("JSON: " + what + " at byte " + std::to_string(pos_));
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t'))
      ++pos_;
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Value value(int depth) {
    if (depth > 64) fail("nesting too deep");
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end");
    Value v;
    char c = s_[pos_];
    if (c == '{') {
      ++pos_;
      v.kind_ = Value::Kind::Object;
      if (consume('}')) return v;
      do {
        skip_space();
        std::string key = string_literal();
        expect(':');
        v.members_.emplace_back(std::move(key), value(depth + 1));
      } while (consume(','));
      expect('}');
    } else if (c == '[') {
      ++pos_;
      v.kind_ = Value::Kind::Array;
      if (consume(']')) return v;
      do
        v.items_.push_back(value(depth + 1));
      while (consume(','));
      expect(']');
    } else if (c == '"') {
      v.kind_ = Value::Kind::String;
      v.text_ = string_literal();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind_ = Value::Kind::Number;
      std::size_t start = pos_;
      while (pos_ < s_.size() && (std::string_view("+-.eE0123456789").find(s_[pos_]) != std::string_view::npos))
        ++pos_;
      v.text_ = std::string(s_.substr(start, pos_ - start));
    } else if (literal("true")) {
      v.kind_ = Value::Kind::Bool;
      v.bool_ = true;
    } else if (literal("false")) {
      v.kind_ = Value::Kind::Bool;
    } else if (literal("null")) {
      v.kind_ = Value::Kind::Null;
    } else {
      fail("unexpected character");
    }
    return v;
  }

  std::string string_literal() {
    if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string");
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          if (pos_ + 4 > s_.size()) fail("short \\u escape");
          unsigned code = std::stoul(std::string(s_.substr(pos_, 4)), nullptr, 16);
          pos_ += 4;
          if (code >= 0x80) fail("non-ASCII \\u escape (manifests are ASCII)");
          out += static_cast<char>(code);
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

Value Value::parse(std::string_view text) {
  return Parser(text).document();
}

bool Value::has(std::string_view key) const {
  if (kind_ != Kind::Object) return false;
  for (const auto& [k, v] : members_)
    if (k == key) return true;
  return false;
}

const Value& Value::at(std::string_view key) const {
  if (kind_ != Kind::Object) throw std::runtime_error("JSON: expected an object holding '" + std::string(key) + "'");
  for (const auto& [k, v] : members_)
    if (k == key) return v;
  throw std::runtime_error("JSON: missing member '" + std::string(key) + "'");
}

const std::vector<Value>& Value::array() const {
  if (kind_ != Kind::Array) throw std::runtime_error("JSON: expected an array");
  return items_;
}

const std::string& Value::string() const {
  if (kind_ != Kind::String) throw std::runtime_error("JSON: expected a string");
  return text_;
}

std::uint64_t Value::u64() const {
  if (kind_ != Kind::Number || text_.empty() || text_.find_first_not_of("0123456789") != std::string::npos)
    throw std::runtime_error("JSON: expected an unsigned integer, got '" + text_ + "'");
  std::size_t used = 0;
  unsigned long long v = std::stoull(text_, &used, 10);
  return v;
}

bool Value::boolean() const {
  if (kind_ != Kind::Bool) throw std::runtime_error("JSON: expected true or false");
  return bool_;
}

void append_string(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += "\\u00";
      out += hex[(c >> 4) & 0xf];
      out += hex[c & 0xf];
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace tenax::ckpt::json
