#include "node_probe.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <iterator>
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
  double answer_ms = -1;  // connect() to accepted, when it succeeded
};

// At most this many connections are open at once (the process's descriptor limit is often 1024); larger
// allocations are probed in rounds, each with the whole timeout.
constexpr std::size_t kProbesPerRound = 256;

enum class Start { InProgress, Failed, Untried };

// Starts a non-blocking connect to the address's first resolved endpoint. Failed: the kernel refused it at once
// (nothing listens, no route). Untried: no address, or no socket for it here — no evidence against the node.
Start start_connect(const NodeAddress& a, int* fd_out) {
  *fd_out = -1;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(a.address.c_str(), std::to_string(a.port).c_str(), &hints, &found) != 0 || found == nullptr)
    return Start::Untried;
  Start result = Start::Untried;
  const int fd = socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, found->ai_protocol);
  if (fd >= 0) {
    if (connect(fd, found->ai_addr, found->ai_addrlen) == 0 || errno == EINPROGRESS) {
      *fd_out = fd;
      result = Start::InProgress;
    } else {
      close(fd);
      result = Start::Failed;
    }
  }
  freeaddrinfo(found);
  return result;
}

// One round: every address at once, for at most `timeout`. Each node that accepted gets its answer time in `answers`.
void probe_round(const NodeAddress* begin, const NodeAddress* end, std::chrono::milliseconds timeout,
                 std::vector<std::string>& unreachable, std::vector<NodeAnswer>* answers) {
  using Clock = std::chrono::steady_clock;
  std::vector<Probe> probes;
  const auto started = Clock::now();
  for (const NodeAddress* a = begin; a != end; ++a) {
    int fd = -1;
    const Start start = start_connect(*a, &fd);
    if (start == Start::Failed) unreachable.push_back(a->node);
    if (start == Start::InProgress) probes.push_back({a->node, fd, false});
  }
  const auto deadline = started + timeout;
  while (true) {
    std::vector<pollfd> waiting;
    std::vector<Probe*> owners;
    for (Probe& p : probes) {
      if (p.answered || p.fd < 0) continue;
      waiting.push_back({p.fd, POLLOUT, 0});
      owners.push_back(&p);
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (waiting.empty() || left.count() <= 0) break;
    if (poll(waiting.data(), waiting.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    const double now_ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    for (std::size_t i = 0; i < waiting.size(); ++i) {
      if (waiting[i].revents == 0) continue;
      int error = 0;
      socklen_t size = sizeof error;
      getsockopt(owners[i]->fd, SOL_SOCKET, SO_ERROR, &error, &size);
      owners[i]->answered = true;
      if (error != 0) {
        close(owners[i]->fd);
        owners[i]->fd = -1;  // refused or unreachable: answered, but not by slurmd
      } else {
        owners[i]->answer_ms = now_ms;
      }
    }
  }
  for (Probe& p : probes) {
    if (!p.answered || p.fd < 0) unreachable.push_back(p.node);
    if (p.answer_ms >= 0 && answers) answers->push_back({p.node, p.answer_ms});
    if (p.fd >= 0) close(p.fd);
  }
}

// Every address, in rounds of kProbesPerRound.
std::vector<std::string> probe_all(const std::vector<NodeAddress>& addresses, std::chrono::milliseconds timeout,
                                   std::vector<NodeAnswer>* answers) {
  std::vector<std::string> unreachable;
  for (std::size_t at = 0; at < addresses.size(); at += kProbesPerRound) {
    const std::size_t end = std::min(addresses.size(), at + kProbesPerRound);
    probe_round(addresses.data() + at, addresses.data() + end, timeout, unreachable, answers);
  }
  return unreachable;
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
  return probe_all(addresses, timeout, nullptr);
}

std::vector<SlowNode> slow_answers(const std::vector<NodeAnswer>& fastest) {
  if (fastest.size() < 2) return {};  // nothing to compare with
  std::vector<double> times;
  for (const NodeAnswer& a : fastest)
    times.push_back(a.ms);
  std::nth_element(times.begin(), times.begin() + static_cast<long>(times.size() / 2), times.end());
  const double typical = times[times.size() / 2];
  std::vector<SlowNode> slow;
  for (const NodeAnswer& a : fastest)
    if (a.ms >= kSlowAnswerMs && a.ms >= kSlowAnswerFactor * typical) slow.push_back({a.node, a.ms, typical});
  std::sort(slow.begin(), slow.end(), [](const SlowNode& x, const SlowNode& y) { return x.answer_ms > y.answer_ms; });
  return slow;
}

NodeProbeResult probe_nodes(const std::vector<NodeAddress>& addresses, std::chrono::milliseconds timeout) {
  NodeProbeResult result;
  std::vector<NodeAnswer> answers;
  result.unreachable = probe_all(addresses, timeout, &answers);
  // The fastest of a few answers per node: one late answer is a scheduling hiccup, a link at a trickle is slow every
  // time. The later rounds ask only the nodes that answered.
  std::vector<NodeAddress> answering;
  for (const NodeAddress& a : addresses)
    if (std::any_of(answers.begin(), answers.end(), [&](const NodeAnswer& n) { return n.node == a.node; }))
      answering.push_back(a);
  for (int round = 1; round < kAnswerRounds && !answering.empty(); ++round) {
    std::vector<NodeAnswer> more;
    probe_all(answering, timeout, &more);
    for (const NodeAnswer& m : more)
      for (NodeAnswer& a : answers)
        if (a.node == m.node) a.ms = std::min(a.ms, m.ms);
  }
  result.slow = slow_answers(answers);
  return result;
}

NodeProbeResult probe_slurm_nodes(const Options& options, const std::vector<std::string>& nodes,
                                  std::chrono::milliseconds timeout, std::string* note) {
  std::vector<std::string> named;
  std::copy_if(nodes.begin(), nodes.end(), std::back_inserter(named), [](const std::string& n) { return !n.empty(); });
  if (named.empty()) return {};
  const std::vector<std::string> argv = {options.scontrol, "show", "node", "-o", join(named, ",")};
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
  return probe_nodes(addresses, timeout);
}

}  // namespace tenax::launch
