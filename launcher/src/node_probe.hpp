// After a failed attempt under Slurm: which nodes of the allocation no longer answer on their slurmd port. A node that
// is cut off, dead or powered down often shows first as a crash or a communicator error of a rank on a healthy node
// (Open MPI aborting on an unreachable peer, say), long before Slurm declares it down (SlurmdTimeout, 300 s by
// default); blaming the node whose rank was reported first would strike a healthy node and keep the lost one.
//
// The probe asks `scontrol show node` for each node's address and slurmd port, then opens a TCP connection to every one
// at once (256 at a time) and waits at most `timeout` for them. A node whose connection is refused, unreachable or not
// accepted in time is unreachable. A node whose address does not resolve, or that this process cannot open a socket
// for (out of descriptors), is not blamed: that is no evidence against the node. A host name is resolved with
// getaddrinfo, under the resolver's own timeouts. A frozen node still accepts connections (its kernel answers): the
// heartbeats catch that one (hang_detector.hpp). A node whose link is throttled to a trickle still answers, slowly:
// the probe asks every answering node kAnswerRounds times and names the ones whose fastest answer took at least
// kSlowAnswerMs and kSlowAnswerFactor times the nodes' median (inside one fabric a connection is accepted in well
// under a millisecond; a link at a trickle takes tens to hundreds). The probe never throws: without an answer from
// scontrol it names no node.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "options.hpp"

namespace tenax::launch {

struct NodeAddress {
  std::string node;
  std::string address;  // NodeAddr: an IPv4 or IPv6 literal, or a host name
  int port = 6818;      // slurmd's port (Slurm's default when scontrol shows none)
};

// Parses `scontrol show node -o` output: one node per line, "NodeName=n1 ... NodeAddr=10.0.0.1 ... Port=6818 ...".
// Lines without NodeName or NodeAddr, and ports outside 1-65535, are skipped.
std::vector<NodeAddress> parse_node_addresses(const std::string& scontrol_output);

inline constexpr int kAnswerRounds = 3;
inline constexpr double kSlowAnswerMs = 10.0;
inline constexpr double kSlowAnswerFactor = 20.0;

struct NodeAnswer {
  std::string node;
  double ms = 0;  // from connect() to the connection's acceptance
};

struct SlowNode {
  std::string node;
  double answer_ms = 0;   // its fastest answer
  double typical_ms = 0;  // the median of every node's fastest answer
};

struct NodeProbeResult {
  std::vector<std::string> unreachable;  // refused, or no answer within the timeout
  std::vector<SlowNode> slow;            // answered, far slower than the others (slowest first)
};

// The nodes among `addresses` that refuse a TCP connection or do not accept it within `timeout` (one round).
std::vector<std::string> unreachable_nodes(const std::vector<NodeAddress>& addresses,
                                           std::chrono::milliseconds timeout);

// The slow among nodes' fastest answers (the rule above); none when fewer than two nodes answered.
std::vector<SlowNode> slow_answers(const std::vector<NodeAnswer>& fastest);

// Unreachable nodes, then kAnswerRounds answers from each node that did answer, each round within `timeout`.
NodeProbeResult probe_nodes(const std::vector<NodeAddress>& addresses, std::chrono::milliseconds timeout);

// Both steps for these nodes (scontrol from Options::scontrol); "" entries are ignored. `note` gets one line when
// scontrol could not say (then no node is named).
NodeProbeResult probe_slurm_nodes(const Options& options, const std::vector<std::string>& nodes,
                                  std::chrono::milliseconds timeout, std::string* note);

}  // namespace tenax::launch
