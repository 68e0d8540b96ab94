// Cuts one output stream of an attempt into lines for the OutputScanner, and decides which bytes may be forwarded to
// the launcher's own stdout/stderr now: whole lines only, so that a rank's line is never split by another rank's or
// by the launcher's own. Pure (no file descriptors), so the pump's splitting can be tested and fuzzed on its own.
//
// Memory is bounded: a line is held back only up to kMaxHeldLine bytes. A longer one (a program writing without
// newlines) is passed through in pieces as it comes, and is not scanned: neither it nor its tail is a report.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "output_scanner.hpp"

namespace tenax::launch {

class LineSplitter {
 public:
  static constexpr std::size_t kMaxHeldLine = 65536;

  // Feeds the next bytes of the stream. Every line they complete is shown to `scanner`; the bytes that may be written
  // now are appended to `forward`. Returns the first failure event these bytes completed.
  std::optional<FailureEvent> feed(OutputScanner& scanner, std::string_view data, std::string& forward);
  // End of the stream: the unterminated rest is scanned and forwarded with a newline.
  std::optional<FailureEvent> finish(OutputScanner& scanner, std::string& forward);
  // Bytes held back, waiting for the end of their line (at most kMaxHeldLine).
  std::size_t held() const { return partial_.size(); }

 private:
  std::string partial_;    // the start of the current line, when it is not overlong
  bool overlong_ = false;  // the current line outgrew kMaxHeldLine: the rest is forwarded as it comes
};

}  // namespace tenax::launch
