#include "bad_nodes.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

[[noreturn]] void io_fail(const std::string& what, const std::string& path) {
  throw IoError(what + " '" + path + "' failed: " + std::strerror(errno));
}

void write_all(int fd, const std::string& content, const std::string& path) {
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) io_fail("writing", path);
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

void write_file_durably(const std::string& path, const std::string& content) {
  const std::string temporary = path + ".tmp";
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_fail("creating", temporary);
  write_all(fd, content, temporary);
  if (fsync(fd) != 0) io_fail("fsync of", temporary);
  if (close(fd) != 0) io_fail("closing", temporary);
  if (rename(temporary.c_str(), path.c_str()) != 0) io_fail("renaming into", path);
  auto slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) io_fail("opening", dir);
  if (fsync(dir_fd) != 0) {
    close(dir_fd);
    io_fail("fsync of", dir);
  }
  close(dir_fd);
}

BadNodes::BadNodes(std::string path) : path_(std::move(path)) {
  std::ifstream in(path_);
  if (!in) {
    if (errno == ENOENT) return;
    io_fail("opening", path_);
  }
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string node, strikes, excluded, reason;
    if (!std::getline(fields, node, '\t') || !std::getline(fields, strikes, '\t') ||
        !std::getline(fields, excluded, '\t') || node.empty() || (excluded != "0" && excluded != "1")) {
      throw IoError("'" + path_ + "' line " + std::to_string(number) +
                    " is not 'node<TAB>strikes<TAB>0|1<TAB>reason': fix or delete the line");
    }
    std::getline(fields, reason);
    Entry entry;
    try {
      entry.strikes = std::stoi(strikes);
    } catch (const std::exception&) {
      throw IoError("'" + path_ + "' line " + std::to_string(number) + ": strikes '" + strikes + "' is not a number");
    }
    entry.excluded = excluded == "1";
    entry.reason = reason;
    entries_[node] = entry;
  }
}

bool BadNodes::blame(const std::string& node, const std::string& reason, bool node_lost, int strikes_limit) {
  Entry& entry = entries_[node];
  const bool was_excluded = entry.excluded;
  ++entry.strikes;
  entry.reason = reason;
  if (node_lost || entry.strikes >= strikes_limit) entry.excluded = true;
  save();
  return entry.excluded && !was_excluded;
}

std::set<std::string> BadNodes::excluded() const {
  std::set<std::string> out;
  for (const auto& [node, entry] : entries_) {
    if (entry.excluded) out.insert(node);
  }
  return out;
}

int BadNodes::strikes(const std::string& node) const {
  auto it = entries_.find(node);
  return it == entries_.end() ? 0 : it->second.strikes;
}

void BadNodes::save() const {
  std::string content = "# tenax-launch bad nodes: node<TAB>strikes<TAB>excluded<TAB>last reason\n";
  for (const auto& [node, entry] : entries_) {
    std::string reason = entry.reason;
    for (char& c : reason) {
      if (c == '\n' || c == '\t') c = ' ';
    }
    content += node + "\t" + std::to_string(entry.strikes) + "\t" + (entry.excluded ? "1" : "0") + "\t" + reason + "\n";
  }
  write_file_durably(path_, content);
}

}  // namespace tenax::launch
