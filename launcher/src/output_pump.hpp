// Copies an attempt's stdout and stderr through to the launcher's own, whole lines at a time, and shows every line to
// the OutputScanner so the process manager's failure reports are caught as they are printed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "line_splitter.hpp"
#include "output_scanner.hpp"

namespace tenax::launch {

class OutputPump {
 public:
  // The most one pump() call reads from each stream before it returns.
  static constexpr std::size_t kMaxReadPerCall = 256 * 1024;
  OutputPump(int stdout_fd, int stderr_fd);
  ~OutputPump();
  OutputPump(const OutputPump&) = delete;
  OutputPump& operator=(const OutputPump&) = delete;

  // Waits up to timeout_ms for output, forwards what arrived. Returns the first failure event seen in this call.
  std::optional<FailureEvent> pump(int timeout_ms);
  // True once both streams reached end of file (every writer exited).
  bool drained() const { return fds_[0] < 0 && fds_[1] < 0; }
  // Every node the process manager reported lost so far (OutputScanner::lost_nodes).
  const std::vector<FailureEvent>& lost_nodes() const { return scanner_.lost_nodes(); }

 private:
  std::optional<FailureEvent> take(int index, const char* data, std::size_t size);

  int fds_[2];
  LineSplitter lines_[2];  // one per stream
  OutputScanner scanner_;
};

// Writes all of `text` to fd (retrying short writes and EINTR; errors are ignored: output is best effort).
void write_all_to(int fd, const std::string& text);

}  // namespace tenax::launch

namespace tenax::launch {
// One line from the launcher itself on stderr ("tenax-launch: ..."), written with one write(2).
void announce(const std::string& line);
}  // namespace tenax::launch
