// Quoting untrusted input (node lists, topology files, addresses) in error messages.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tenax::placement_detail {

// How much of a value a message quotes: messages go to terminals and daemon logs, and the value may be megabytes.
inline constexpr std::size_t kQuotedChars = 200;

// `text` in double quotes; a longer text is cut after kQuotedChars characters and its length is given instead.
inline std::string quote_input(std::string_view text) {
  if (text.size() <= kQuotedChars) return "\"" + std::string(text) + "\"";
  return "\"" + std::string(text.substr(0, kQuotedChars)) + "...\" (" + std::to_string(text.size()) + " characters)";
}

}  // namespace tenax::placement_detail
