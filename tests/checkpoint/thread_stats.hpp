// This process's threads as the kernel lists them (/proc/self/task): how many carry a name, and a named thread's
// niceness. For tests of the checkpointer's I/O and staging threads (which name themselves).
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tenax::test {

// Threads of this process named `name`.
inline int threads_named(const std::string& name) {
  int n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::string comm;
    std::getline(std::ifstream(task.path() / "comm"), comm);
    n += comm == name ? 1 : 0;
  }
  return n;
}

// The niceness of this process's thread named `name` (field 19 of /proc/self/task/<tid>/stat), or -100 if none.
inline int thread_niceness(const std::string& name) {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::string comm;
    std::getline(std::ifstream(task.path() / "comm"), comm);
    if (comm != name) continue;
    std::string stat;
    std::getline(std::ifstream(task.path() / "stat"), stat);
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // after "pid (comm) "
    std::string field;
    for (int i = 3; i <= 19 && fields >> field; ++i)
      if (i == 19) return std::stoi(field);
  }
  return -100;
}

}  // namespace tenax::test
