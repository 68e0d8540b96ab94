#include "tenax/log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <vector>

#include "tenax/env.hpp"

namespace tenax::log {
namespace {

struct State {
  std::mutex mutex;  // guards reconfiguration, not writes (each line is one write(2))
  std::atomic<int> level{static_cast<int>(Level::Warn)};
  std::vector<std::string> subsystems;  // empty: all
  int fd = STDERR_FILENO;
  std::string host;
  std::atomic<int> rank{-1};
};

State& state() {
  static State s;
  return s;
}

// The rank the launcher gave this process, before the communicator exists.
int rank_from_launcher_env() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return -1;
}

std::string hostname() {
  // Under Slurm several emulated or real nodes may share a host name; the node name is what people look for.
  if (const char* node = std::getenv("SLURMD_NODENAME")) return node;
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

std::string expand_path(const std::string& pattern, const std::string& host, int rank) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      const char c = pattern[++i];
      if (c == 'h')
        out += host;
      else if (c == 'p')
        out += std::to_string(getpid());
      else if (c == 'r')
        out += std::to_string(rank);
      else if (c == '%')
        out += '%';
      else
        out += std::string("%") + c;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

constexpr std::string_view level_name(Level l) {
  switch (l) {
    case Level::Error:
      return "ERROR";
    case Level::Warn:
      return "WARN";
    case Level::Info:
      return "INFO";
    case Level::Debug:
      return "DEBUG";
  }
  return "?";
}

}  // namespace

void configure() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.host = hostname();
  if (s.rank.load() < 0) s.rank = rank_from_launcher_env();

  const std::string level = env::get_string("TENAX_LOG_LEVEL");
  Level parsed = Level::Warn;
  if (level == "error")
    parsed = Level::Error;
  else if (level == "info")
    parsed = Level::Info;
  else if (level == "debug")
    parsed = Level::Debug;
  s.level = static_cast<int>(parsed);

  s.subsystems.clear();
  const std::string subsys = env::get_string("TENAX_LOG_SUBSYS");
  for (std::size_t start = 0; start < subsys.size();) {
    std::size_t comma = subsys.find(',', start);
    if (comma == std::string::npos) comma = subsys.size();
    if (comma > start) s.subsystems.push_back(subsys.substr(start, comma - start));
    start = comma + 1;
  }

  const std::string file = env::get_string("TENAX_LOG_FILE");
  if (s.fd != STDERR_FILENO) {
    close(s.fd);
    s.fd = STDERR_FILENO;
  }
  if (!file.empty()) {
    const std::string path = expand_path(file, s.host, s.rank.load());
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      std::fprintf(stderr, "tenax: cannot open TENAX_LOG_FILE '%s': %s; logging to stderr\n", path.c_str(),
                   std::strerror(errno));
    } else {
      s.fd = fd;
    }
  }
}

bool enabled(Level level, std::string_view subsys) {
  State& s = state();
  if (static_cast<int>(level) > s.level.load(std::memory_order_relaxed)) return false;
  // Errors and warnings are always shown; the subsystem filter narrows the chatty levels only.
  if (level <= Level::Warn || s.subsystems.empty()) return true;
  for (const std::string& name : s.subsystems)
    if (name == subsys) return true;
  return false;
}

void set_rank(int r) {
  state().rank = r;
}

int rank() {
  State& s = state();
  if (s.rank.load() < 0) s.rank = rank_from_launcher_env();
  return s.rank.load();
}

void write(Level level, std::string_view subsys, std::string_view message) {
  State& s = state();
  if (s.host.empty()) {
    std::lock_guard lock(s.mutex);
    if (s.host.empty()) s.host = hostname();
  }
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const int millis =
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  localtime_r(&seconds, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);

  std::string line;
  line.reserve(message.size() + 96);
  line += s.host;
  line += ':';
  line += std::to_string(getpid());
  line += " [";
  line += std::to_string(rank());
  line += "] ";
  line += stamp;
  line += '.';
  char ms[8];
  std::snprintf(ms, sizeof ms, "%03d", millis);
  line += ms;
  line += ' ';
  line += level_name(level);
  line += ' ';
  line += subsys;
  line += ": ";
  line += message;
  if (line.empty() || line.back() != '\n') line += '\n';
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(s.fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // nowhere left to report a failing log write
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace tenax::log
