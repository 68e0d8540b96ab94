#!/usr/bin/env bash
# The main job on a fresh machine: installs what is missing, builds, and trains the MLP language-model example on 4
# local ranks under Open MPI's mpirun (CPU) with 2-way tensor and 2-stage pipeline parallelism.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh" "$root/build"
source "$root/scripts/mpi-env.sh"
exec mpirun -n "${TENAX_MAIN_RANKS:-4}" "$root/build/examples/mlp_lm/tenax-example-lm" --tp 2 --pp 2 --steps 50 "$@"
