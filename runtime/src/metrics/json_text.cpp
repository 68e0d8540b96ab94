#include "metrics/json_text.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tenax::metrics::detail {

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
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
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.12g", value);
  return buf;
}

namespace {

// A recursive-descent reader over one line; every method returns false (with `error` set) on malformed input.
class Reader {
 public:
  Reader(std::string_view text, std::string& error) : text_(text), error_(error) {}

  bool object(std::map<std::string, JsonScalar>* members, int depth) {
    if (depth > 32) return fail("nesting deeper than 32");
    if (!expect('{')) return false;
    skip_space();
    if (peek() == '}') return ++pos_, true;
    for (;;) {
      std::string key;
      skip_space();
      if (!string(key) || !expect(':')) return false;
      JsonScalar value;
      if (!any(members != nullptr ? &value : nullptr, depth)) return false;
      if (members != nullptr) (*members)[key] = value;
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      return expect('}');
    }
  }

  bool at_end() {
    skip_space();
    return pos_ == text_.size() || fail("trailing characters after the object");
  }

 private:
  // Reads any value; a scalar is stored in `out` when given, nested values are only checked.
  bool any(JsonScalar* out, int depth) {
    skip_space();
    const char c = peek();
    if (c == '{') return object(nullptr, depth + 1);
    if (c == '[') return array(depth + 1);
    if (c == '"') {
      std::string s;
      if (!string(s)) return false;
      if (out != nullptr) *out = std::move(s);
      return true;
    }
    if (literal("true")) return out != nullptr ? (*out = true, true) : true;
    if (literal("false")) return out != nullptr ? (*out = false, true) : true;
    if (literal("null")) return out != nullptr ? (*out = nullptr, true) : true;
    return number(out);
  }

  bool array(int depth) {
    if (depth > 32) return fail("nesting deeper than 32");
    if (!expect('[')) return false;
    skip_space();
    if (peek() == ']') return ++pos_, true;
    for (;;) {
      if (!any(nullptr, depth)) return false;
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      return expect(']');
    }
  }

  bool string(std::string& out) {
    if (!expect('"')) return false;
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character inside a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) break;
      const char e = text_[pos_++];
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
        case 'u':
          // Kept as written: ledger strings are ASCII names; the escape is validated, not decoded.
          if (pos_ + 4 > text_.size()) return fail("truncated \\u escape");
          for (int i = 0; i < 4; ++i)
            if (!std::isxdigit(static_cast<unsigned char>(text_[pos_ + i]))) return fail("bad \\u escape");
          out += "\\u";
          out += text_.substr(pos_, 4);
          pos_ += 4;
          break;
        default:
          return fail(std::string("bad escape \\") + e);
      }
    }
    return fail("unterminated string");
  }

  bool number(JsonScalar* out) {
    const std::size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
      if (peek() >= '0' && peek() <= '9') return fail("leading zero in a number");
    } else if (!digits()) {
      return fail("expected a value");
    }
    if (peek() == '.') {
      ++pos_;
      if (!digits()) return fail("digits expected after '.'");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!digits()) return fail("digits expected in the exponent");
    }
    if (out != nullptr) *out = std::strtod(std::string(text_.substr(start, pos_ - start)).c_str(), nullptr);
    return true;
  }

  bool digits() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9')
      ++pos_;
    return pos_ > start;
  }
  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  bool expect(char c) {
    skip_space();
    if (peek() == c) return ++pos_, true;
    return fail(std::string("expected '") + c + "'");
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool fail(const std::string& what) {
    if (error_.empty()) error_ = what + " at column " + std::to_string(pos_ + 1);
    return false;
  }

  std::string_view text_;
  std::string& error_;
  std::size_t pos_ = 0;
};

}  // namespace

std::optional<std::map<std::string, JsonScalar>> parse_flat_object(std::string_view text, std::string& error) {
  error.clear();
  std::map<std::string, JsonScalar> members;
  Reader reader(text, error);
  if (!reader.object(&members, 0) || !reader.at_end()) return std::nullopt;
  return members;
}

}  // namespace tenax::metrics::detail
