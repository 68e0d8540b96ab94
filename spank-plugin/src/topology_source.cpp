#include "topology_source.hpp"

#include <filesystem>
#include <system_error>

#include "tenax/error.hpp"

namespace tenax::spank {

SwitchTree load_switch_tree(const AdminConfig& admin, const std::string& slurm_conf, std::string* note) {
  std::error_code ec;
  if (!admin.topology_file.empty()) {
    if (!std::filesystem::is_regular_file(admin.topology_file, ec))
      throw Error("plugstack.conf: topology_file=" + admin.topology_file + " is " +
                  (std::filesystem::exists(admin.topology_file, ec) ? "not a regular file" : "missing") +
                  " on this node: install it on every compute node, fix the path, or remove the key (then " +
                  "topology.conf beside slurm.conf is read when present)");
    return SwitchTree::from_topology_conf_file(admin.topology_file);
  }
  const std::string beside = (std::filesystem::path(slurm_conf).parent_path() / "topology.conf").string();
  if (!std::filesystem::exists(beside, ec)) {
    if (note != nullptr) *note = "no topology file at " + beside + ": every node is treated as its own leaf switch";
    return SwitchTree{};
  }
  return SwitchTree::from_topology_conf_file(beside);
}

}  // namespace tenax::spank
