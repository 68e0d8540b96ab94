// Agreeing on work that only this rank does. Opening this node's copy of a dataset, checking this rank's own files or
// inputs: when such work fails on one rank and not on the others, the others go on into the next collective and wait
// there for the failed rank until the communication timeout. Run it through run_on_every_rank instead, and every rank
// stops at once with the failure.
#pragma once

#include <functional>

#include "tenax/communicator.hpp"

namespace tenax {

// Collective over `comm` (a host communicator; every rank calls it). Runs `local` on this rank, then agrees on the
// outcome: when `local` raised on any rank, every rank raises — UsageError if any rank's exception was one (a wrong
// option or path, never retried by tenax-launch), else IoError — with a failing rank's message.
void run_on_every_rank(Communicator& comm, const std::function<void()>& local);

}  // namespace tenax
