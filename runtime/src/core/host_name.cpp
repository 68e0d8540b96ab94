#include "core/host_name.hpp"

#include <unistd.h>

#include <climits>
#include <cstdlib>

namespace tenax::detail {

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::string node_name() {
  if (const char* slurm = std::getenv("SLURMD_NODENAME"); slurm != nullptr && *slurm != '\0') return slurm;
  return host_name();
}

}  // namespace tenax::detail
