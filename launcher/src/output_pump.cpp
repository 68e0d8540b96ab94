#include "output_pump.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace tenax::launch {

void write_all_to(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

OutputPump::OutputPump(int stdout_fd, int stderr_fd) : fds_{stdout_fd, stderr_fd} {}

OutputPump::~OutputPump() {
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
}

std::optional<FailureEvent> OutputPump::take(int index, const char* data, std::size_t size) {
  std::string forward;
  auto event = lines_[index].feed(scanner_, std::string_view(data, size), forward);
  write_all_to(index == 0 ? STDOUT_FILENO : STDERR_FILENO, forward);
  return event;
}

std::optional<FailureEvent> OutputPump::pump(int timeout_ms) {
  std::optional<FailureEvent> first;
  pollfd fds[2];
  int count = 0;
  int index_of[2];
  for (int i = 0; i < 2; ++i) {
    if (fds_[i] < 0) continue;
    fds[count] = {fds_[i], POLLIN, 0};
    index_of[count++] = i;
  }
  if (count == 0) {
    if (timeout_ms > 0) poll(nullptr, 0, timeout_ms);
    return first;
  }
  if (poll(fds, count, timeout_ms) <= 0) return first;  // timeout, or EINTR from a signal: the caller looks
  char buffer[16384];
  for (int k = 0; k < count; ++k) {
    if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    int i = index_of[k];
    // At most kMaxReadPerCall per stream: a program that writes without pause must not keep the caller from watching
    // heartbeats and signals; what is left is read on the next call.
    for (std::size_t taken = 0; taken < kMaxReadPerCall;) {
      ssize_t n = read(fds_[i], buffer, sizeof buffer);
      if (n > 0) {
        auto event = take(i, buffer, static_cast<std::size_t>(n));
        if (event && !first) first = std::move(event);
        taken += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      // End of file or error: flush what is left and stop watching this stream.
      std::string forward;
      auto event = lines_[i].finish(scanner_, forward);
      if (event && !first) first = std::move(event);
      write_all_to(i == 0 ? STDOUT_FILENO : STDERR_FILENO, forward);
      close(fds_[i]);
      fds_[i] = -1;
      break;
    }
  }
  return first;
}

}  // namespace tenax::launch

namespace tenax::launch {
void announce(const std::string& line) {
  write_all_to(STDERR_FILENO, "tenax-launch: " + line + "\n");
}
}  // namespace tenax::launch
