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
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/host_name.hpp"
#include "tenax/env.hpp"

namespace tenax::log {
namespace {

// One configuration, never modified after it is published: writers take a reference to the current one and use it
// for the whole line, so configure() can never change a filter, a host name or a file descriptor under them. The
// descriptor belongs to the configuration and is closed when the last line written through it is done.
struct Config {
  Level level = Level::Warn;
  std::vector<std::string> subsystems;  // empty: all
  std::string host;
  int fd = STDERR_FILENO;
  Config() = default;
  Config(const Config&) = delete;
  Config& operator=(const Config&) = delete;
  ~Config() {
    if (fd != STDERR_FILENO) close(fd);
  }
};

struct State {
  State();
  // Who uses the current configuration takes a reference under `publish_mutex`, held only to copy a shared_ptr.
  // (std::atomic<std::shared_ptr> would do the same, but libstdc++ 12 releases its internal lock with relaxed order
  // and ThreadSanitizer reports a race there.) configure() builds the next one under `configure_mutex`, then swaps
  // it in.
  std::shared_ptr<const Config> current() {
    std::lock_guard lock(publish_mutex);
    return config;
  }
  std::mutex configure_mutex;
  std::mutex publish_mutex;
  std::shared_ptr<const Config> config;
  // A copy of config's level, so that the check before formatting a message costs one relaxed load.
  std::atomic<int> level{static_cast<int>(Level::Warn)};
  std::atomic<int> rank{-1};
};

State& state() {
  // Never destroyed: objects destroyed at exit (the communicator watchdog, for one) may still log.
  static State* s = new State;
  return *s;
}

// The rank the launcher gave this process, before the communicator exists.
int rank_from_launcher_env() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return -1;
}

State::State() {
  auto initial = std::make_shared<Config>();
  initial->host = detail::node_name();
  config = std::move(initial);
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

// The launcher's rank while none is known; never over a rank set_rank() gave meanwhile (another thread may log while
// the runtime sets it).
void adopt_launcher_rank(State& s) {
  int unknown = -1;
  if (s.rank.load() < 0) s.rank.compare_exchange_strong(unknown, rank_from_launcher_env());
}

// Whether a TENAX_LOG_FILE pattern holds %r (not %%r).
bool names_rank(const std::string& pattern) {
  for (std::size_t i = 0; i + 1 < pattern.size(); ++i)
    if (pattern[i] == '%') {
      if (pattern[i + 1] == 'r') return true;
      ++i;  // %% and the other escapes
    }
  return false;
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
  std::lock_guard lock(s.configure_mutex);
  auto next = std::make_shared<Config>();
  next->host = detail::node_name();
  adopt_launcher_rank(s);

  const std::string level = env::get_string("TENAX_LOG_LEVEL");
  if (level == "error")
    next->level = Level::Error;
  else if (level == "info")
    next->level = Level::Info;
  else if (level == "debug")
    next->level = Level::Debug;

  const std::string subsys = env::get_string("TENAX_LOG_SUBSYS");
  for (std::size_t start = 0; start < subsys.size();) {
    std::size_t comma = subsys.find(',', start);
    if (comma == std::string::npos) comma = subsys.size();
    if (comma > start) next->subsystems.push_back(subsys.substr(start, comma - start));
    start = comma + 1;
  }

  const std::string file = env::get_string("TENAX_LOG_FILE");
  // A name with the rank (%r) waits for it: a process started without a launcher learns it only from MPI (set_rank),
  // and its lines go to stderr until then rather than to a file named for rank -1.
  if (!file.empty() && !(names_rank(file) && s.rank.load() < 0)) {
    const std::string path = expand_path(file, next->host, s.rank.load());
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      std::fprintf(stderr, "tenax: cannot open TENAX_LOG_FILE '%s': %s; logging to stderr\n", path.c_str(),
                   std::strerror(errno));
    } else {
      next->fd = fd;
    }
  }
  const int next_level = static_cast<int>(next->level);
  std::shared_ptr<const Config> published = std::move(next);
  {
    std::lock_guard publish(s.publish_mutex);
    s.config.swap(published);
  }
  s.level.store(next_level, std::memory_order_relaxed);
  // `published` now holds the previous configuration: its file is closed when the last line written through it is done.
}

bool enabled(Level level, std::string_view subsys) {
  State& s = state();
  if (static_cast<int>(level) > s.level.load(std::memory_order_relaxed)) return false;
  // Errors and warnings are always shown; the subsystem filter narrows the chatty levels only.
  if (level <= Level::Warn) return true;
  const std::shared_ptr<const Config> config = s.current();
  if (config->subsystems.empty()) return true;
  for (const std::string& name : config->subsystems)
    if (name == subsys) return true;
  return false;
}

void set_rank(int r) {
  const int before = state().rank.exchange(r);
  if (before != r && names_rank(env::get_string("TENAX_LOG_FILE"))) configure();  // the file named for this rank
}

int rank() {
  State& s = state();
  adopt_launcher_rank(s);
  return s.rank.load();
}

void write(Level level, std::string_view subsys, std::string_view message) {
  // This line's configuration: its host name and descriptor stay valid until the line is written.
  const std::shared_ptr<const Config> config = state().current();
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
  line += config->host;
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
    const ssize_t n = ::write(config->fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // nowhere left to report a failing log write
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace tenax::log
