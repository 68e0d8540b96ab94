// tenax-launch reads every line its ranks print for the process manager's failure reports (output_scanner.hpp). The
// lines are the ranks' own output: any bytes must be scanned without a crash, a sanitizer report or an exception, and
// an event must be one the scanner can have read (a line within the bound, a rank and a value that are numbers).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "output_scanner.hpp"

namespace {

void check(const std::optional<tenax::launch::FailureEvent>& event) {
  using Kind = tenax::launch::FailureEvent::Kind;
  if (!event) return;
  if (event->text.size() > tenax::launch::kMaxScannedLine) std::abort();
  if (event->rank < -1 || event->value < 0) std::abort();
  if (event->kind == Kind::NodeLost && (event->node.empty() || event->rank != -1)) std::abort();
  // The SPANK plugin's refusal names no rank: the step never started.
  if (event->kind == Kind::Refused && event->rank != -1) std::abort();
  if (event->kind != Kind::NodeLost && event->kind != Kind::Refused && event->rank < 0) std::abort();
}

// The lost nodes the scanner keeps: bounded, one entry per node, each named.
void check_lost_nodes(const tenax::launch::OutputScanner& scanner) {
  const auto& lost = scanner.lost_nodes();
  if (lost.size() > tenax::launch::OutputScanner::kMaxLostNodes) std::abort();
  for (std::size_t i = 0; i < lost.size(); ++i) {
    if (lost[i].node.empty() || lost[i].kind != tenax::launch::FailureEvent::Kind::NodeLost) std::abort();
    for (std::size_t j = 0; j < i; ++j)
      if (lost[j].node == lost[i].node) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  tenax::launch::OutputScanner scanner;
  // The whole input as one line, then line by line as the pump passes them (the scanner keeps a pending "Process
  // name" from one line to the next).
  check(scanner.scan(text));
  for (std::size_t start = 0; start <= text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    check(scanner.scan(text.substr(start, end - start)));
    start = end + 1;
  }
  check_lost_nodes(scanner);
  return 0;
}
