#!/usr/bin/env bash
# Every test on a fresh machine: installs what is missing, builds, and runs the whole suite (unit tests, multi-process
# tests under mpirun, kernel tests, real-Slurm tests), then the sanitizer and fuzzing run (scripts/run-sanitizers.sh:
# the unit, fuzz and multi-rank tests under ASan+UBSan, every fuzzer for a bounded time). Exits non-zero on any
# failure. TENAX_SANITIZERS=0 skips the second part (for a quick local iteration; CI runs both).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/script-settings.sh"
test_jobs=$(tenax_setting_count TENAX_TEST_JOBS 2 4096)
sanitizers=$(tenax_setting_choice TENAX_SANITIZERS 1 0 1)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh" "$root/build"
source "$root/scripts/mpi-env.sh"
cd "$root/build"
ctest --output-on-failure --timeout 900 -j "$test_jobs" "$@"
if [ "$sanitizers" = 1 ]; then
  bash "$root/scripts/run-sanitizers.sh" "$root/build-sanitize"
fi
