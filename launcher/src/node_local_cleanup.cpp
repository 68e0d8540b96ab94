#include "node_local_cleanup.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "checkpoint/local_tier_cleanup.hpp"

namespace tenax::launch {
namespace {

std::string mebibytes(std::uint64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buffer;
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
  const char* pattern = std::getenv("TENAX_CKPT_LOCAL_DIR");
  if (pattern == nullptr || *pattern == '\0' || std::string(pattern) == "none" || job_id.empty()) return "";
  const std::string dir = ckpt::expand_node(pattern, ckpt::this_node_name());
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

}  // namespace tenax::launch
