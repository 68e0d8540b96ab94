// The restart loop: plan an attempt, run it, classify what happened, record it in the ledger, decide, repeat.
#pragma once

#include "options.hpp"

namespace tenax::launch {

// Runs the whole launch and returns the launcher's exit code (0, 64, 75, 70 or 71; see classify.hpp).
// Throws UsageError for problems found before the first attempt starts.
int supervise(const Options& options);

}  // namespace tenax::launch
