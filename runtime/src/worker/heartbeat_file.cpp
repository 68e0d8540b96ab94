#include "worker/heartbeat_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/json.hpp"
#include "tenax/error.hpp"

namespace tenax::worker {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw IoError(what + " '" + path + "' failed: " + std::strerror(errno) +
                " (the run directory must be writable by every rank)");
}

}  // namespace

std::string format_heartbeat(const HeartbeatRecord& r) {
  // Core's JSON writer: the node name (SLURMD_NODENAME, any length and any bytes) is escaped and never cut.
  json::ObjectWriter out;
  out.add("v", 1)
      .add("rank", r.rank)
      .add("node", r.node)
      .add("pid", r.pid)
      .add("attempt", r.attempt)
      .add("beat", r.beat)
      .add("step", r.step)
      .add("seq", r.seq)
      .add("resumed_step", r.resumed_step)
      .add("load_s", r.load_s)
      .add("productive_s", r.productive_s)
      .add("steps_done", r.steps_done)
      .add("checkpoint_step", r.checkpoint_step)
      .add("checkpoint_stall_s", r.checkpoint_stall_s)
      .add("preempt_signal", r.preempt_signal)
      .add("exit", r.exit_code);
  return out.str() + "\n";
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
