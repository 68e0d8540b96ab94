// Quoting untrusted input (node lists, topology files, addresses) in error messages.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tenax::placement_detail {

// How much of a value a message quotes: messages go to terminals and daemon logs, and the value may be megabytes.
inline constexpr std::size_t kQuotedChars = 200;

// `text` in double quotes, control characters as \xNN: a NUL would end the message in a C string (slurmd's log kept
// only what came before it), an escape sequence would act on the reader's terminal. A longer text is cut after
// kQuotedChars characters and its length is given instead.
inline std::string quote_input(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (const char c : text.substr(0, kQuotedChars)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += c;
    }
  }
  if (text.size() <= kQuotedChars) return out + "\"";
  return out + "...\" (" + std::to_string(text.size()) + " characters)";
}

}  // namespace tenax::placement_detail
