// The launcher's own SIGTERM / SIGUSR1 / SIGINT: recorded by an async-signal-safe handler, acted on by the
// supervision loop (forward to the workers, wait for their emergency checkpoint, requeue, exit 75).
#pragma once

namespace tenax::launch {

void install_launcher_signal_handlers();
// The first preemption signal received (0: none).
int received_signal() noexcept;

}  // namespace tenax::launch
