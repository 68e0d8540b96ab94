#!/usr/bin/env bash
# The main job on a fresh machine: installs what is missing, builds, and runs the communication self-test on 4 local
# ranks under Open MPI's mpirun (CPU).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh" "$root/build"
source "$root/scripts/mpi-env.sh"
exec mpirun -n "${TENAX_MAIN_RANKS:-4}" "$root/build/examples/comm_selftest/tenax-comm-selftest" "$@"
