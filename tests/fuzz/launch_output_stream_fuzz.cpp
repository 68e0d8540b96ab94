// The pump's line splitting (line_splitter.hpp) over any stream a rank may write, cut into reads of any size:
//   - every byte is forwarded exactly once and in order (one newline is added to an unterminated stream), whatever the
//     read size;
//   - the bytes held back never exceed kMaxHeldLine;
//   - the failure events are those of the stream's whole lines, scanned one by one: a piece of a line (the tail of
//     one too long to hold) is never taken for a line of its own.
// Input: byte 0 sets the read size (1 to 256 bytes), byte 1 how many times the rest is repeated (1 to 64), so that
// short inputs reach lines longer than the hold limit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "line_splitter.hpp"

namespace {

using tenax::launch::FailureEvent;

bool same(const FailureEvent& a, const FailureEvent& b) {
  return a.kind == b.kind && a.rank == b.rank && a.node == b.node && a.value == b.value && a.text == b.text;
}

// Splits `stream` in reads of `read_size`; returns what is forwarded. With reads of one byte, each read completes at
// most one line, so `events` gets every event.
std::string split(std::string_view stream, std::size_t read_size, std::vector<FailureEvent>& events) {
  tenax::launch::OutputScanner scanner;
  tenax::launch::LineSplitter lines;
  std::string forward;
  for (std::size_t at = 0; at < stream.size(); at += read_size) {
    auto event = lines.feed(scanner, stream.substr(at, read_size), forward);
    if (event) events.push_back(*event);
    if (lines.held() > tenax::launch::LineSplitter::kMaxHeldLine) std::abort();
  }
  auto event = lines.finish(scanner, forward);
  if (event) events.push_back(*event);
  if (lines.held() != 0) std::abort();
  return forward;
}

// The events of the stream's lines, each scanned whole.
std::vector<FailureEvent> line_by_line(std::string_view stream) {
  tenax::launch::OutputScanner scanner;
  std::vector<FailureEvent> events;
  for (std::size_t start = 0; start < stream.size();) {
    std::size_t end = stream.find('\n', start);
    if (end == std::string_view::npos) end = stream.size();
    if (auto event = scanner.scan(stream.substr(start, end - start))) events.push_back(*event);
    start = end + 1;
  }
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t read_size = 1 + data[0];
  const std::size_t repeat = 1 + data[1] % 64;
  const std::string_view unit(reinterpret_cast<const char*>(data) + 2, size - 2);
  std::string stream;
  for (std::size_t i = 0; i < repeat; ++i)
    stream += unit;

  std::string expected = stream;
  if (!expected.empty() && expected.back() != '\n') expected += '\n';
  std::vector<FailureEvent> ignored, events;
  if (split(stream, read_size, ignored) != expected) std::abort();
  if (split(stream, stream.size() + 1, ignored) != expected) std::abort();
  if (split(stream, 1, events) != expected) std::abort();
  const std::vector<FailureEvent> reference = line_by_line(stream);
  if (events.size() != reference.size()) std::abort();
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (!same(events[i], reference[i])) std::abort();
  }
  return 0;
}
