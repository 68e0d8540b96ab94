// The small JSON subset the checkpoint manifest needs: objects, arrays, strings, unsigned integers, booleans, null.
// A manifest must stay readable by any JSON tool (`python3 -m json.tool manifest.json`), so it is plain JSON; numbers
// are kept as their text so that 64-bit sizes and offsets round-trip exactly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tenax::ckpt::json {

class Value {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  static Value parse(std::string_view text);  // throws std::runtime_error with the byte offset of the problem

  Kind kind() const { return kind_; }
  // Each accessor throws std::runtime_error naming `what` when the value is not of the expected kind.
  const Value& at(std::string_view key) const;
  bool has(std::string_view key) const;
  const std::vector<Value>& array() const;
  const std::string& string() const;
  std::uint64_t u64() const;
  bool boolean() const;

 private:
  friend class Parser;
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  std::string text_;  // String: the unescaped text; Number: the literal
  std::vector<Value> items_;
  std::vector<std::pair<std::string, Value>> members_;
};

// Appends `s` as a quoted, escaped JSON string.
void append_string(std::string& out, std::string_view s);

}  // namespace tenax::ckpt::json
