// Open MPI's shared-memory transport (btl vader) keeps one backing file per rank in /dev/shm, which the rank removes
// when it ends normally. A rank that is killed (kill -9, the OOM killer, a crash, the launcher's own teardown of a
// failed attempt) leaves its file there, in memory, until the node reboots: a run that restarts a hundred times on a
// node leaves hundreds (the development machine's /dev/shm held 712 after a few days of test suites). Each local
// attempt therefore gets a folder of its own for them (btl_vader_backing_directory), locked while it lives and removed
// after the attempt; the folders of a launcher killed outright are removed by the next launcher on the node.
#pragma once

#include <string>
#include <vector>

#include "core/abandoned_siblings.hpp"

namespace tenax::launch {

class MpiShmDir {
 public:
  // Makes the folder under `parent`, first removing the folders there that no living launcher holds. path() is ""
  // when it cannot be made (no such parent, full, not writable): Open MPI's default applies then.
  explicit MpiShmDir(const std::string& parent = "/dev/shm");
  // Removes the folder and whatever the ranks left in it. Only after every rank of the attempt has ended.
  ~MpiShmDir();
  MpiShmDir(const MpiShmDir&) = delete;
  MpiShmDir& operator=(const MpiShmDir&) = delete;

  const std::string& path() const { return dir_.path; }
  // Earlier launchers' folders removed when this one was made, each "<path> (pid N)".
  const std::vector<std::string>& removed_leftovers() const { return removed_; }

 private:
  detail::SiblingDir dir_;
  std::vector<std::string> removed_;
};

}  // namespace tenax::launch
