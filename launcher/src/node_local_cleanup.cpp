#include "node_local_cleanup.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <system_error>

#include "checkpoint/local_tier_cleanup.hpp"
#include "core/host_name.hpp"

namespace tenax::launch {
namespace {

std::string mebibytes(std::uint64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buffer;
}

// TENAX_CKPT_LOCAL_DIR of the launcher's environment with %n as this node; "" when there is no node-local tier.
std::string this_nodes_local_dir() {
  const char* pattern = std::getenv("TENAX_CKPT_LOCAL_DIR");
  if (pattern == nullptr || *pattern == '\0' || std::string(pattern) == "none") return "";
  return ckpt::expand_node(pattern, detail::node_name());
}

}  // namespace

std::string new_local_job_id() {
  std::random_device device;
  const std::uint64_t value = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "local-%016llx", static_cast<unsigned long long>(value));
  return buffer;
}

std::string remove_node_local_copies(const std::string& job_id) {
  const std::string dir = this_nodes_local_dir();
  if (dir.empty() || job_id.empty()) return "";
  const ckpt::LocalCleanupReport report = ckpt::remove_job_local_copies(dir, job_id);
  std::string line;
  if (report.removed > 0) {
    line = "removed this run's node-local checkpoint copies from " + dir + " (" + std::to_string(report.removed) +
           " folder(s), " + mebibytes(report.bytes) + ")";
  }
  for (const auto& path : report.in_use) {
    line += std::string(line.empty() ? "" : "; ") + "left " + path +
            ": a process still uses it (another part of the same job on this node, or a rank that outlived the run)";
  }
  for (const auto& error : report.errors) {
    line += std::string(line.empty() ? "" : "; ") + "warning: could not remove a node-local copy: " + error;
  }
  return line;
}

std::string kept_node_local_copies(const std::string& job_id) {
  const std::string dir = this_nodes_local_dir();
  if (dir.empty() || job_id.empty()) return "";
  std::string folders;
  std::error_code error;
  for (auto it = std::filesystem::directory_iterator(dir, error); !error && it != std::filesystem::directory_iterator();
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (ckpt::is_local_tier_folder(name) && ckpt::local_tier_folder_job(it->path().string()) == job_id)
      folders += (folders.empty() ? "" : ", ") + it->path().string();
  }
  if (folders.empty()) return "";
  return "kept this run's node-local checkpoint copies (" + folders +
         "): running the same command again resumes from them; remove them yourself if you give the run up";
}

}  // namespace tenax::launch
