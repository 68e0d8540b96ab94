// Internal: the names of the machine and of the node this process runs on, for logs, lock and run files, node-local
// folders and messages. MPI-free: part of tenax_core.
#pragma once

#include <string>

namespace tenax::detail {

// This machine's host name (gethostname(2)); "localhost" when it cannot be read.
std::string host_name();
// The node as Slurm names it (SLURMD_NODENAME: several emulated nodes may share one host, and the node name is what
// people look for), else host_name().
std::string node_name();

}  // namespace tenax::detail
