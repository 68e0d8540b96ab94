#include "core/abandoned_siblings.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "core/file_system.hpp"

namespace tenax::detail {
namespace {

std::atomic<int> g_serial{0};
constexpr int kMaxNameTries = 1000;  // names left by earlier processes of the same pid, skipped

bool all_digits(std::string_view text) {
  if (text.empty() || text.size() > 18) return false;
  for (const char c : text)
    if (c < '0' || c > '9') return false;
  return true;
}

// A process of that pid runs on this host (EPERM: it runs, as another user).
bool running(long pid) {
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

enum class Holder { None, Someone, Unknown };  // Unknown: the file system keeps no locks on folders

// Whether a living writer holds the folder at `path` (it is opened without following a link).
Holder holder_of(const std::string& path) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return Holder::Someone;                             // gone, or not ours to judge: left alone
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return Holder::None;  // released when fd closes, before the removal
  return errno == EWOULDBLOCK ? Holder::Someone : Holder::Unknown;
}

}  // namespace

std::string sibling_name(const std::string& target, const std::string& kind, const std::string& node) {
  return target + "." + kind + "-" + node + "-" + std::to_string(::getpid()) + "-" + std::to_string(g_serial++);
}

UniqueFd lock_sibling(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.valid() && ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) fd.reset();
  return fd;
}

int make_sibling_dir(const std::string& target, const std::string& kind, const std::string& node, SiblingDir& out,
                     mode_t mode) {
  for (int tries = 0;; ++tries) {
    out.path = sibling_name(target, kind, node);
    if (::mkdir(out.path.c_str(), mode) == 0) break;
    if (errno != EEXIST || tries == kMaxNameTries) return errno;
  }
  out.lock = lock_sibling(out.path);
  return 0;
}

std::vector<std::string> remove_abandoned_siblings(const std::string& target, const std::string& kind,
                                                   const std::string& node,
                                                   bool (*same_family)(const std::string& name)) {
  std::vector<std::string> removed;
  const std::string parent = fs::parent_of(target);
  const std::string own = target.substr(target.rfind('/') + 1);
  const std::string infix = "." + kind + "-" + node + "-";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(parent, error)) {
    const std::string name = entry.path().filename().string();
    // "<target name><infix><pid>-<n>", both decimal, for this target or (same_family) another of its kind.
    const std::size_t at = name.rfind(infix);
    if (at == std::string::npos) continue;
    const std::string base = name.substr(0, at);
    if (base != own && (same_family == nullptr || !same_family(base))) continue;
    const std::string_view rest = std::string_view(name).substr(at + infix.size());
    const std::size_t dash = rest.find('-');
    if (dash == std::string_view::npos || !all_digits(rest.substr(0, dash)) || !all_digits(rest.substr(dash + 1)))
      continue;
    long pid = 0;
    std::from_chars(rest.data(), rest.data() + dash, pid);
    const std::string path = fs::join(parent, name);
    struct stat st {};
    if (pid <= 0 || ::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
    const Holder holder = holder_of(path);
    // Unlocked: no writer works there (a writer locks its folder, this process's own live ones included); a folder of
    // a living pid stays all the same (a writer of a tenax that locked nothing, a folder being discarded), unless that
    // pid is this process's, which names an earlier process (a container restarted in place). Without locks: only
    // the pid can tell, and this process's own pid says nothing.
    const bool abandoned = (holder == Holder::None && (pid == ::getpid() || !running(pid))) ||
                           (holder == Holder::Unknown && pid != ::getpid() && !running(pid));
    if (!abandoned) continue;
    try {
      fs::remove_tree(path);
      removed.push_back(path + " (pid " + std::to_string(pid) + ")");
    } catch (const std::exception&) {
      // Left for the next writer, or for a person: it is never taken for a dataset.
    }
  }
  return removed;
}

}  // namespace tenax::detail
