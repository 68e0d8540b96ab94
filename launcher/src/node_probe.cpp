#include "node_probe.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <sstream>

#include "attempt_plan.hpp"
#include "processes.hpp"
#include "slurm.hpp"
#include "tenax/error.hpp"

namespace tenax::launch {
namespace {

constexpr std::size_t kMaxNodesProbed = 4096;     // an allocation larger than this is probed in part
constexpr std::size_t kScontrolOutput = 8 << 20;  // about 2 KB per node

std::string field(const std::string& line, const std::string& name) {
  const std::string key = name + "=";
  for (std::size_t at = line.find(key); at != std::string::npos; at = line.find(key, at + 1)) {
    if (at != 0 && line[at - 1] != ' ') continue;
    const std::size_t begin = at + key.size();
    const std::size_t end = line.find(' ', begin);
    return line.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  }
  return "";
}

struct Probe {
  std::string node;
  int fd = -1;
  bool answered = false;
};

// Starts a non-blocking connect to the address's first resolved endpoint; -1 when it failed at once (refused or
// unreachable, or no address).
int start_connect(const NodeAddress& a) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(a.address.c_str(), std::to_string(a.port).c_str(), &hints, &found) != 0 || found == nullptr)
    return -1;
  int fd = socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, found->ai_protocol);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) != 0 && errno != EINPROGRESS) {
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  return fd;
}

}  // namespace

std::vector<NodeAddress> parse_node_addresses(const std::string& output) {
  std::vector<NodeAddress> out;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line) && out.size() < kMaxNodesProbed;) {
    NodeAddress a;
    a.node = field(line, "NodeName");
    a.address = field(line, "NodeAddr");
    if (a.node.empty() || a.address.empty()) continue;
    const std::string port = field(line, "Port");
    if (!port.empty()) {
      int value = 0;
      const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
      if (error != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535) continue;
      a.port = value;
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<std::string> unreachable_nodes(const std::vector<NodeAddress>& addresses,
                                           std::chrono::milliseconds timeout) {
  std::vector<Probe> probes;
  std::vector<std::string> unreachable;
  for (const NodeAddress& a : addresses) {
    const int fd = start_connect(a);
    if (fd < 0) {
      unreachable.push_back(a.node);
    } else {
      probes.push_back({a.node, fd, false});
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::vector<pollfd> waiting;
    std::vector<Probe*> owners;
    for (Probe& p : probes) {
      if (p.answered || p.fd < 0) continue;
      waiting.push_back({p.fd, POLLOUT, 0});
      owners.push_back(&p);
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (waiting.empty() || left.count() <= 0) break;
    if (poll(waiting.data(), waiting.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    for (std::size_t i = 0; i < waiting.size(); ++i) {
      if (waiting[i].revents == 0) continue;
      int error = 0;
      socklen_t size = sizeof error;
      getsockopt(owners[i]->fd, SOL_SOCKET, SO_ERROR, &error, &size);
      owners[i]->answered = true;
      if (error != 0) {
        close(owners[i]->fd);
        owners[i]->fd = -1;  // refused or unreachable: answered, but not by slurmd
      }
    }
  }
  for (Probe& p : probes) {
    if (!p.answered || p.fd < 0) unreachable.push_back(p.node);
    if (p.fd >= 0) close(p.fd);
  }
  return unreachable;
}

std::vector<std::string> probe_slurm_nodes(const Options& options, const std::vector<std::string>& nodes,
                                           std::chrono::milliseconds timeout, std::string* note) {
  std::string list;
  for (const std::string& n : nodes) {
    if (n.empty()) continue;
    if (!list.empty()) list += ',';
    list += n;
  }
  if (list.empty()) return {};
  const std::vector<std::string> argv = {options.scontrol, "show", "node", "-o", list};
  CommandResult result;
  try {
    result = run_command(argv, kScontrolOutput, std::chrono::milliseconds(10000));
  } catch (const Error& error) {
    if (note) *note = "`" + join(argv, " ") + "` could not be started: " + error.what();
    return {};
  }
  // scontrol exits non-zero when one of the nodes is unknown but still prints the others.
  const std::vector<NodeAddress> addresses = parse_node_addresses(result.out);
  if (addresses.empty()) {
    if (note) *note = describe_failure(argv, result);
    return {};
  }
  return unreachable_nodes(addresses, timeout);
}

}  // namespace tenax::launch
