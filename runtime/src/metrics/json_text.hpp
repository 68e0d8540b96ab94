// Internal: the small amount of JSON the metrics outputs need: writing numbers and strings, and reading flat objects
// (one ledger line) strictly.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace tenax::metrics::detail {

// A JSON string literal, quotes included.
std::string json_string(std::string_view text);
// A JSON number with enough digits to round-trip timings (%.12g); non-finite values become null.
std::string json_number(double value);

// The top-level members of one JSON object whose values are numbers, strings, booleans or null (nested objects and
// arrays are checked and skipped). Returns nullopt and sets `error` when the text is not exactly one valid object.
using JsonScalar = std::variant<std::nullptr_t, bool, double, std::string>;
std::optional<std::map<std::string, JsonScalar>> parse_flat_object(std::string_view text, std::string& error);

}  // namespace tenax::metrics::detail
