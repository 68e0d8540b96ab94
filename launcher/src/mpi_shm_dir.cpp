#include "mpi_shm_dir.hpp"

#include "core/file_system.hpp"
#include "core/host_name.hpp"

namespace tenax::launch {
namespace {

constexpr const char* kKind = "mpi";

}  // namespace

MpiShmDir::MpiShmDir(const std::string& parent) {
  const std::string target = fs::join(parent, "tenax-launch");
  const std::string node = detail::node_name();
  removed_ = detail::remove_abandoned_siblings(target, kKind, node);
  // 0700: the ranks' memory is no other user's to list or open.
  if (detail::make_sibling_dir(target, kKind, node, dir_, 0700) != 0) dir_.path.clear();
}

MpiShmDir::~MpiShmDir() {
  if (dir_.path.empty()) return;
  try {
    fs::remove_tree(dir_.path);
  } catch (const std::exception&) {
    // Left locked by nobody once this launcher ends: the next launcher on the node removes it.
  }
}

}  // namespace tenax::launch
