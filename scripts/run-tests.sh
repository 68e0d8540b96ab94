#!/usr/bin/env bash
# Every test on a fresh machine: installs what is missing, builds, and runs the whole suite (unit tests, multi-process
# tests under mpirun, kernel tests, real-Slurm tests). Exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh" "$root/build"
source "$root/scripts/mpi-env.sh"
cd "$root/build"
ctest --output-on-failure --timeout 900 -j "${TENAX_TEST_JOBS:-2}" "$@"
