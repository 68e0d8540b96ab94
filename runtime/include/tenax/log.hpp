// Logging. Controlled at run time:
//   TENAX_LOG_LEVEL   error | warn | info | debug     (default: warn)
//   TENAX_LOG_SUBSYS  comma list of subsystems to show at debug/info (default: all), e.g. "comm,ckpt"
//   TENAX_LOG_FILE    write to this file instead of stderr; %h = host, %p = pid, %r = rank are substituted
// Every line is prefixed "host:pid [rank] LEVEL subsys:". Lines are written with one write(2) so that lines from
// different threads and ranks never interleave mid-line.
//
//   TENAX_LOG(Info, "comm") << "split " << name << " size " << n;
#pragma once

#include <sstream>
#include <string_view>

namespace tenax::log {

enum class Level { Error = 0, Warn = 1, Info = 2, Debug = 3 };

// True when a message at `level` for `subsys` would be written (cheap; checked before formatting).
bool enabled(Level level, std::string_view subsys);

// Sets the rank shown in the prefix (before this, the rank is read from the launcher's environment if present).
void set_rank(int rank);
int rank();

// Re-reads TENAX_LOG_* (called by tenax::Runtime after env::validate; tests call it after changing the environment).
// Safe while other threads log: each line is written whole with the configuration before or after the change, and a
// replaced log file is closed once the last line written through it is done.
void configure();

void write(Level level, std::string_view subsys, std::string_view message);

class Line {
 public:
  Line(Level level, std::string_view subsys) : level_(level), subsys_(subsys) {}
  ~Line() { write(level_, subsys_, stream_.str()); }
  Line(const Line&) = delete;
  Line& operator=(const Line&) = delete;
  template <class T>
  Line& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  Level level_;
  std::string_view subsys_;
  std::ostringstream stream_;
};

}  // namespace tenax::log

// A loop that runs at most once (not an if/else) so that the macro is safe inside an unbraced if; arguments are not
// evaluated when the message is filtered out.
#define TENAX_LOG(level, subsys)                                                                          \
  for (bool tenax_log_once_ = ::tenax::log::enabled(::tenax::log::Level::level, subsys); tenax_log_once_; \
       tenax_log_once_ = false)                                                                           \
  ::tenax::log::Line(::tenax::log::Level::level, subsys)
