#include "worker/heartbeat_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "tenax/error.hpp"

namespace tenax::worker {
namespace {

// Node names come from SLURMD_NODENAME / gethostname: escape what JSON requires and nothing more.
std::string json_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
      out += buffer;
    } else {
      out += c;
    }
  }
  return out;
}

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw IoError(what + " '" + path + "' failed: " + std::strerror(errno) +
                " (the run directory must be writable by every rank)");
}

}  // namespace

std::string format_heartbeat(const HeartbeatRecord& r) {
  char buffer[640];
  std::snprintf(buffer, sizeof buffer,
                "{\"v\":1,\"rank\":%d,\"node\":\"%s\",\"pid\":%ld,\"attempt\":%d,\"beat\":%" PRIu64 ",\"step\":%" PRId64
                ",\"seq\":%" PRIu64 ",\"resumed_step\":%" PRId64
                ",\"load_s\":%.6f,\"productive_s\":%.6f,\"steps_done\":%" PRId64 ",\"checkpoint_step\":%" PRId64
                ",\"checkpoint_stall_s\":%.6f,\"preempt_signal\":%d,\"exit\":%d}\n",
                r.rank, json_escape(r.node).c_str(), r.pid, r.attempt, r.beat, r.step, r.seq, r.resumed_step, r.load_s,
                r.productive_s, r.steps_done, r.checkpoint_step, r.checkpoint_stall_s, r.preempt_signal, r.exit_code);
  return buffer;
}

std::string heartbeat_dir(const std::string& run_dir, int attempt) {
  return run_dir + "/heartbeat/attempt-" + std::to_string(attempt);
}

std::string heartbeat_path(const std::string& run_dir, int attempt, int rank) {
  return heartbeat_dir(run_dir, attempt) + "/rank-" + std::to_string(rank) + ".json";
}

void replace_file_atomically(const std::string& path, const std::string& content) {
  const std::string temporary = path + ".tmp." + std::to_string(getpid());
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("creating", temporary);
  std::size_t written = 0;
  while (written < content.size()) {
    ssize_t n = write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int saved = errno;
      close(fd);
      errno = saved;
      fail("writing", temporary);
    }
    written += static_cast<std::size_t>(n);
  }
  if (close(fd) != 0) fail("closing", temporary);
  if (rename(temporary.c_str(), path.c_str()) != 0) fail("renaming into", path);
}

}  // namespace tenax::worker
