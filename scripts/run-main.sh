#!/usr/bin/env bash
# The main job on a fresh machine: installs what is missing, builds, and trains the MLP language-model example on 4
# local ranks (2-way tensor x 2-stage pipeline parallelism, CPU) under tenax-launch, which starts the ranks with Open
# MPI's mpirun, checkpoints through the run and restarts it from its newest checkpoint if a rank fails.
# Each invocation gets its own run directory under build/runs/; extra arguments go to the training program.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh" "$root/build"
source "$root/scripts/mpi-env.sh"
run="$root/build/runs/main-$(date +%Y%m%d-%H%M%S)"
echo "tenax: run directory $run"
exec "$root/build/launcher/src/tenax-launch" -n "${TENAX_MAIN_RANKS:-4}" --run-dir "$run" \
  --checkpoint-dir "$run/checkpoints" -- \
  "$root/build/examples/mlp_lm/tenax-example-lm" --tp 2 --pp 2 --steps 200 --checkpoint-every 50 "$@"
