#include "bad_nodes.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/file_system.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

[[noreturn]] void io_fail(const std::string& what, const std::string& path) {
  throw IoError(what + " '" + path + "' failed: " + std::strerror(errno));
}

}  // namespace

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
  fs::replace_file_atomically(path_, content, fs::Durability::ContentsAndName);
}

}  // namespace tenax::launch
