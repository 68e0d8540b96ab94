#include "metrics/run_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/file_system.hpp"
#include "tenax/error.hpp"

namespace tenax::metrics::detail {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw IoError("metrics: " + what + " " + path + ": " + std::strerror(err));
}

void close_file(int fd, const std::string& path, Sync sync) {
  if (sync == Sync::Yes && ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail("cannot fsync", path, err);
  }
  if (::close(fd) != 0) fail("cannot close", path, errno);
}

}  // namespace

void make_directories(const std::string& path) {
  if (path.empty()) return;
  std::string prefix;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    prefix = path.substr(0, pos);
    if (prefix.empty()) continue;
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) fail("cannot create directory", prefix, errno);
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw IoError("metrics: " + path + " exists but is not a directory: point TENAX_RUN_DIR at a directory");
}

void append(const std::string& path, std::string_view content, Sync sync) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot open", path, errno);
  try {
    fs::write_all(fd, content, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  close_file(fd, path, sync);
}

std::string read_if_exists(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) return {};
    fail("cannot read", path, errno);
  }
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

}  // namespace tenax::metrics::detail
