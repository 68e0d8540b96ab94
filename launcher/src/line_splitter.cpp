#include "line_splitter.hpp"

namespace tenax::launch {

std::optional<FailureEvent> LineSplitter::feed(OutputScanner& scanner, std::string_view data, std::string& forward) {
  std::optional<FailureEvent> first;
  partial_.append(data);
  std::size_t start = 0;
  for (std::size_t newline; (newline = partial_.find('\n', start)) != std::string::npos; start = newline + 1) {
    std::string_view line(partial_.data() + start, newline - start);
    auto event = scanner.scan(line);
    if (event && !first) first = std::move(event);
  }
  forward.append(partial_, 0, start);
  partial_.erase(0, start);
  if (partial_.size() > 65536) {  // a program writing without newlines: pass it through anyway
    forward += partial_;
    partial_.clear();
  }
  return first;
}

std::optional<FailureEvent> LineSplitter::finish(OutputScanner& scanner, std::string& forward) {
  if (partial_.empty()) return std::nullopt;
  auto event = scanner.scan(partial_);
  forward += partial_;
  forward += '\n';
  partial_.clear();
  return event;
}

}  // namespace tenax::launch
