#include "data/abandoned_siblings.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "core/file_system.hpp"

namespace tenax::data {
namespace {

std::atomic<int> g_serial{0};

bool all_digits(std::string_view text) {
  if (text.empty() || text.size() > 18) return false;
  for (const char c : text)
    if (c < '0' || c > '9') return false;
  return true;
}

// A process of that pid runs on this host (EPERM: it runs, as another user).
bool running(long pid) {
  return pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

std::string sibling_name(const std::string& target, const std::string& kind, const std::string& node) {
  return target + "." + kind + "-" + node + "-" + std::to_string(::getpid()) + "-" + std::to_string(g_serial++);
}

std::vector<std::string> remove_abandoned_siblings(const std::string& target, const std::string& kind,
                                                   const std::string& node) {
  std::vector<std::string> removed;
  const std::string parent = fs::parent_of(target);
  const std::string prefix = target.substr(target.rfind('/') + 1) + "." + kind + "-" + node + "-";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(parent, error)) {
    const std::string name = entry.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    // "<pid>-<n>" after the prefix, both decimal.
    const std::string_view rest = std::string_view(name).substr(prefix.size());
    const std::size_t dash = rest.find('-');
    if (dash == std::string_view::npos || !all_digits(rest.substr(0, dash)) || !all_digits(rest.substr(dash + 1)))
      continue;
    long pid = 0;
    std::from_chars(rest.data(), rest.data() + dash, pid);
    const std::string path = fs::join(parent, name);
    struct stat st {};
    if (pid <= 0 || running(pid) || ::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid())
      continue;
    try {
      fs::remove_tree(path);
      removed.push_back(path + " (pid " + std::to_string(pid) + ")");
    } catch (const std::exception&) {
      // Left for the next writer, or for a person: it is never taken for a dataset.
    }
  }
  return removed;
}

}  // namespace tenax::data
