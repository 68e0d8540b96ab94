// Collective agreement on an outcome, over the training thread's communicator. Every rank learns the worst outcome
// and, when there is a failure, the message of the lowest rank that has it, so that every rank raises the same error.
#pragma once

#include <string>
#include <vector>

#include "tenax/communicator.hpp"

namespace tenax::ckpt {

struct Outcome {
  int code = 0;         // 0 = fine; larger is worse (the meaning is the caller's)
  std::string message;  // why, when code != 0
};

// Collective. Returns the largest code of all ranks and the message of the lowest rank with that code, prefixed
// "rank <r>: ".
Outcome agree(Communicator& comm, const Outcome& local);

// Collective: rank 0 receives every rank's string (index = rank); other ranks receive an empty vector.
std::vector<std::string> gather_strings(Communicator& comm, const std::string& mine);

// Collective: every rank receives every rank's string.
std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine);

// Collective: every rank returns root's `text`.
std::string broadcast_string(Communicator& comm, const std::string& text, int root);

}  // namespace tenax::ckpt
