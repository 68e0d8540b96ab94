// Parser for Slurm's topology.conf (topology/tree): "SwitchName=s0 Nodes=tux[0-3] LinkSpeed=900".
#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "placement/quote.hpp"
#include "tenax/error.hpp"
#include "tenax/hostlist.hpp"
#include "tenax/topology.hpp"

namespace tenax {
namespace {

struct LogicalLine {
  int number = 0;  // physical line where it starts (1-based)
  std::string text;
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Strips '#' comments and joins lines ending in '\' with the next one.
std::vector<LogicalLine> logical_lines(std::string_view text) {
  std::vector<LogicalLine> lines;
  std::string pending;
  int pending_start = 0;
  int number = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    ++number;
    if (std::size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
      line.remove_suffix(1);
    if (pending.empty()) pending_start = number;
    bool continued = !line.empty() && line.back() == '\\';
    if (continued) line.remove_suffix(1);
    pending += line;
    if (continued) {
      pending += ' ';
    } else {
      lines.push_back({pending_start, pending});
      pending.clear();
    }
    if (end == text.size()) break;
    pos = end + 1;
  }
  if (!pending.empty()) lines.push_back({pending_start, pending});
  return lines;
}

struct ParsedSwitch {
  std::string name;
  int line = 0;
  std::vector<std::string> nodes;
  std::vector<std::string> children;
};

[[noreturn]] void too_large(std::string_view origin) {
  throw UsageError(std::string(origin) + ": larger than " + std::to_string(kMaxTopologyConfBytes) +
                   " bytes; a topology.conf describes switches with hostlists (Nodes=n[1-512]) and is far smaller: "
                   "check that the path names the right file");
}

// Counts the names a line's hostlist adds to the file's total (before expanding it) and refuses the line that takes
// the total over the caps: the caps of expand_hostlist hold per list, these for the whole file.
void count_names(std::string_view list, HostlistSize& total) {
  const HostlistSize size = measure_hostlist(list);
  total.hosts += size.hosts;  // each term is capped far below overflow
  total.chars += size.chars;
  if (total.hosts > kMaxHostlistHosts || total.chars > kMaxHostlistChars)
    throw UsageError("the file lists more than " + std::to_string(kMaxHostlistHosts) + " nodes and switches (or " +
                     std::to_string(kMaxHostlistChars) +
                     " characters of their names) in all; check the Nodes= and Switches= ranges for a typo");
}

}  // namespace

SwitchTree SwitchTree::from_topology_conf(std::string_view text, std::string_view origin) {
  if (text.size() > kMaxTopologyConfBytes) too_large(origin);
  std::vector<ParsedSwitch> parsed;
  HostlistSize names;  // of every Nodes= and Switches= list so far
  for (const LogicalLine& line : logical_lines(text)) {
    const std::string where = std::string(origin) + ":" + std::to_string(line.number);
    std::istringstream tokens(line.text);
    std::map<std::string, std::string> fields;  // lower-case key -> value
    std::string token;
    while (tokens >> token) {
      std::size_t eq = token.find('=');
      if (eq == std::string::npos || eq == 0)
        throw UsageError(where + ": " + placement_detail::quote_input(token) +
                         " is not key=value; write e.g. SwitchName=s0 Nodes=n[1-4]");
      std::string key = lower(std::string_view(token).substr(0, eq));
      if (key == "blockname")
        throw UsageError(where +
                         ": BlockName= belongs to Slurm's topology/block; tenax placement reads the "
                         "topology/tree format (SwitchName= with Nodes= or Switches=)");
      if (key != "switchname" && key != "nodes" && key != "switches" && key != "linkspeed")
        throw UsageError(where + ": unknown key " + placement_detail::quote_input(token.substr(0, eq)) +
                         "; topology.conf lines take SwitchName=, Nodes=, Switches= and LinkSpeed=");
      if (!fields.emplace(key, token.substr(eq + 1)).second)
        throw UsageError(where + ": key " + placement_detail::quote_input(token.substr(0, eq)) +
                         " given twice; keep one");
    }
    if (fields.empty()) continue;
    auto name = fields.find("switchname");
    if (name == fields.end() || name->second.empty())
      throw UsageError(where + ": line has no SwitchName=; every line describes one switch");
    ParsedSwitch sw;
    sw.name = name->second;
    sw.line = line.number;
    try {
      const auto nodes = fields.find("nodes");
      const auto switches = fields.find("switches");
      if (nodes != fields.end()) count_names(nodes->second, names);
      if (switches != fields.end()) count_names(switches->second, names);
      if (nodes != fields.end()) sw.nodes = expand_hostlist(nodes->second);
      if (switches != fields.end()) sw.children = expand_hostlist(switches->second);
    } catch (const UsageError& e) {
      throw UsageError(where + ": " + e.what());
    }
    parsed.push_back(std::move(sw));
  }

  SwitchTree tree;
  std::unordered_map<std::string, int> index;
  for (const ParsedSwitch& p : parsed) {
    if (!index.emplace(p.name, static_cast<int>(tree.switches_.size())).second)
      throw UsageError(std::string(origin) + ":" + std::to_string(p.line) + ": switch " +
                       placement_detail::quote_input(p.name) + " is defined twice; merge the two lines");
    Switch s;
    s.name = p.name;
    s.nodes = p.nodes;
    tree.switches_.push_back(std::move(s));
  }
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    const std::string where = std::string(origin) + ":" + std::to_string(parsed[i].line);
    for (const std::string& child : parsed[i].children) {
      auto it = index.find(child);
      if (it == index.end())
        throw UsageError(where + ": switch " + placement_detail::quote_input(parsed[i].name) + " lists child switch " +
                         placement_detail::quote_input(child) +
                         ", which has no SwitchName= line; define it or remove it from Switches=");
      Switch& c = tree.switches_[static_cast<std::size_t>(it->second)];
      if (c.parent >= 0)
        throw UsageError(where + ": switch " + placement_detail::quote_input(child) + " has two parents (" +
                         placement_detail::quote_input(tree.switches_[c.parent].name) + " and " +
                         placement_detail::quote_input(parsed[i].name) + "); a tree gives each switch one parent");
      c.parent = static_cast<int>(i);
      tree.switches_[i].child_switches.push_back(it->second);
    }
  }
  tree.finish(origin);
  return tree;
}

SwitchTree SwitchTree::from_topology_conf_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open topology file \"" + path + "\"; check the path and its permissions");
  // Read in pieces and stop past the cap, so that an endless file (a FIFO, /dev/zero) is refused, not read forever.
  std::string text;
  std::vector<char> piece(std::size_t{1} << 16);
  while (in.read(piece.data(), static_cast<std::streamsize>(piece.size())) || in.gcount() > 0) {
    text.append(piece.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxTopologyConfBytes) too_large(path);
  }
  if (in.bad()) throw IoError("cannot read topology file \"" + path + "\"");
  return from_topology_conf(text, path);
}

}  // namespace tenax
