#include "line_splitter.hpp"

namespace tenax::launch {

std::optional<FailureEvent> LineSplitter::feed(OutputScanner& scanner, std::string_view data, std::string& forward) {
  std::optional<FailureEvent> first;
  for (std::size_t newline; (newline = data.find('\n')) != std::string_view::npos;) {
    const std::string_view piece = data.substr(0, newline);
    if (overlong_) {
      overlong_ = false;  // the tail of a line already passed through: no line of its own
    } else if (partial_.size() + piece.size() <= kMaxScannedLine) {
      auto event = partial_.empty() ? scanner.scan(piece) : scanner.scan(partial_ + std::string(piece));
      if (event && !first) first = std::move(event);
    }
    forward += partial_;
    forward.append(piece);
    forward += '\n';
    partial_.clear();
    data.remove_prefix(newline + 1);
  }
  if (overlong_) {
    forward.append(data);
  } else if (partial_.size() + data.size() <= kMaxHeldLine) {
    partial_.append(data);
  } else {
    forward += partial_;
    forward.append(data);
    partial_.clear();
    overlong_ = true;
  }
  return first;
}

std::optional<FailureEvent> LineSplitter::finish(OutputScanner& scanner, std::string& forward) {
  std::optional<FailureEvent> event;
  if (!overlong_ && !partial_.empty()) event = scanner.scan(partial_);
  if (overlong_ || !partial_.empty()) {
    forward += partial_;
    forward += '\n';
  }
  partial_.clear();
  overlong_ = false;
  return event;
}

}  // namespace tenax::launch
