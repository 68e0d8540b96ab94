#include "flat_json.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

class Reader {
 public:
  Reader(std::string_view text, const std::string& origin) : text_(text), origin_(origin) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw IoError("cannot read '" + origin_ + "': " + what + " at offset " + std::to_string(pos_) +
                  " (the file is not a record tenax wrote, or it was damaged)");
  }
  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }
  bool at_end() {
    skip_space();
    return pos_ == text_.size();
  }
  char peek() {
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end");
    return text_[pos_];
  }
  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      char c = text_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      char e = text_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
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
          if (pos_ + 4 > text_.size()) fail("short \\u escape");
          unsigned code = std::strtoul(std::string(text_.substr(pos_, 4)).c_str(), nullptr, 16);
          pos_ += 4;
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
          }
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }
  double number() {
    skip_space();
    std::string token;
    while (pos_ < text_.size() && std::string_view("+-0123456789.eE").find(text_[pos_]) != std::string_view::npos) {
      token += text_[pos_++];
    }
    if (token.empty()) fail("expected a value");
    char* end = nullptr;
    double value = std::strtod(token.c_str(), &end);
    if (end != token.c_str() + token.size()) fail("bad number '" + token + "'");
    return value;
  }

 private:
  std::string_view text_;
  const std::string& origin_;
  std::size_t pos_ = 0;
};

}  // namespace

FlatJson FlatJson::parse(std::string_view text, const std::string& origin) {
  FlatJson json;
  json.origin_ = origin;
  Reader reader(text, origin);
  reader.expect('{');
  if (!reader.consume('}')) {
    do {
      std::string key = reader.string();
      reader.expect(':');
      Value value{Value::Kind::Null, 0, {}};
      char c = reader.peek();
      if (c == '"') {
        value = Value{Value::Kind::String, 0, reader.string()};
      } else if (reader.literal("true")) {
        value = Value{Value::Kind::Number, 1, {}};
      } else if (reader.literal("false")) {
        value = Value{Value::Kind::Number, 0, {}};
      } else if (reader.literal("null")) {
        value = Value{Value::Kind::Null, 0, {}};
      } else if (c == '{' || c == '[') {
        reader.fail("nested value for key '" + key + "'");
      } else {
        value = Value{Value::Kind::Number, reader.number(), {}};
      }
      json.values_[key] = std::move(value);
    } while (reader.consume(','));
    reader.expect('}');
  }
  if (!reader.at_end()) reader.fail("trailing characters");
  return json;
}

double FlatJson::number(const std::string& key, double fallback) const {
  auto it = values_.find(key);
  if (it == values_.end() || it->second.kind == Value::Kind::Null) return fallback;
  if (it->second.kind != Value::Kind::Number) {
    throw IoError("'" + origin_ + "': field '" + key + "' should be a number, found \"" + it->second.text + "\"");
  }
  return it->second.number;
}

long long FlatJson::integer(const std::string& key, long long fallback) const {
  return static_cast<long long>(std::llround(number(key, static_cast<double>(fallback))));
}

std::string FlatJson::string(const std::string& key, const std::string& fallback) const {
  auto it = values_.find(key);
  if (it == values_.end() || it->second.kind == Value::Kind::Null) return fallback;
  if (it->second.kind != Value::Kind::String) {
    throw IoError("'" + origin_ + "': field '" + key + "' should be a string");
  }
  return it->second.text;
}

std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
      out += buffer;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void JsonLine::key(std::string_view name) {
  if (body_.size() > 1) body_ += ',';
  body_ += json_quote(name);
  body_ += ':';
}

JsonLine& JsonLine::add(std::string_view name, std::string_view value) {
  key(name);
  body_ += json_quote(value);
  return *this;
}

JsonLine& JsonLine::add(std::string_view name, double value) {
  key(name);
  if (!std::isfinite(value)) {
    body_ += "null";
    return *this;
  }
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.6f", value);
  body_ += buffer;
  return *this;
}

JsonLine& JsonLine::add(std::string_view name, long long value) {
  key(name);
  body_ += std::to_string(value);
  return *this;
}

JsonLine& JsonLine::add(std::string_view name, bool value) {
  key(name);
  body_ += value ? "true" : "false";
  return *this;
}

JsonLine& JsonLine::add_null(std::string_view name) {
  key(name);
  body_ += "null";
  return *this;
}

}  // namespace tenax::launch
