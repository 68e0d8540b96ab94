// Nodes blamed for failures, persisted in <run-dir>/bad-nodes.txt so that exclusions survive a Slurm requeue.
// A lost node is excluded at once; other failures blamed on a node add a strike, and the node is excluded after
// --bad-node-strikes of them. The file is rewritten atomically (temporary + fsync + rename) after every change.
//
// Format: one node per line, fields separated by a tab: node, strikes, excluded (0/1), last reason. Lines starting
// with '#' are comments. An operator may delete a line to give a repaired node back.
#pragma once

#include <map>
#include <set>
#include <string>

namespace tenax::launch {

class BadNodes {
 public:
  // Reads `path` if it exists. Throws IoError when it exists but cannot be read or parsed.
  explicit BadNodes(std::string path);

  // Records a failure blamed on `node`. Returns true when this made the node excluded.
  bool blame(const std::string& node, const std::string& reason, bool node_lost, int strikes_limit);

  std::set<std::string> excluded() const;
  int strikes(const std::string& node) const;
  const std::string& path() const { return path_; }

 private:
  struct Entry {
    int strikes = 0;
    bool excluded = false;
    std::string reason;
  };
  void save() const;

  std::string path_;
  std::map<std::string, Entry> entries_;
};

}  // namespace tenax::launch
