// A reader and writer for flat JSON objects (string, number, bool and null values; no nesting): the only JSON the
// launcher reads (heartbeat files, ledger lines) and writes (ledger lines). Small on purpose: the launcher has no
// JSON dependency, and a record it cannot read is reported, never guessed at.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace tenax::launch {

class FlatJson {
 public:
  // Parses one object; throws IoError naming `origin` (a path) and the offset of the first thing it cannot read.
  static FlatJson parse(std::string_view text, const std::string& origin);

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  // Numbers and booleans (true = 1); `fallback` when absent or null. Throws IoError when the value is a string.
  double number(const std::string& key, double fallback = 0) const;
  long long integer(const std::string& key, long long fallback = 0) const;
  std::string string(const std::string& key, const std::string& fallback = "") const;

 private:
  struct Value {
    enum class Kind { Number, String, Null } kind;
    double number = 0;
    std::string text;
  };
  std::map<std::string, Value> values_;
  std::string origin_;
};

// Builds one JSON object line, keys in insertion order.
class JsonLine {
 public:
  JsonLine& add(std::string_view key, std::string_view value);
  JsonLine& add(std::string_view key, const char* value) { return add(key, std::string_view(value)); }
  JsonLine& add(std::string_view key, const std::string& value) { return add(key, std::string_view(value)); }
  JsonLine& add(std::string_view key, double value);
  JsonLine& add(std::string_view key, long long value);
  JsonLine& add(std::string_view key, int value) { return add(key, static_cast<long long>(value)); }
  JsonLine& add(std::string_view key, bool value);
  JsonLine& add_null(std::string_view key);
  // The object followed by a newline.
  std::string str() const { return body_ + "}\n"; }

 private:
  void key(std::string_view key);
  std::string body_ = "{";
};

std::string json_quote(std::string_view text);

}  // namespace tenax::launch
