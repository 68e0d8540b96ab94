// Where to cut a line too long to hand to SentencePiece at once: its trainer drops sentences over 16384 bytes, and its
// encoder needs ~175 bytes of memory per byte it encodes at once. Shared by the tokenizer's encode and tenax-data's
// trainer, so that both cut the same way.
#pragma once

#include <cstddef>
#include <string_view>

namespace tenax::data {

// The length of the first part of `text` (longer than `limit`, limit >= 2) when it is cut into parts of at most
// `limit` bytes: after the last space or tab in the second half of the limit, else at the last UTF-8 character
// boundary within it (a continuation byte is 10xxxxxx), so that no character is split. At least 1.
inline std::size_t cut_point(std::string_view text, std::size_t limit) {
  for (std::size_t at = limit; at > limit / 2; --at)
    if (text[at - 1] == ' ' || text[at - 1] == '\t') return at;
  std::size_t at = limit;
  while (at > 1 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80)
    --at;
  return at;
}

}  // namespace tenax::data
