#!/usr/bin/env bash
# The main job on a fresh machine: installs what is missing, builds, prepares the real-text dataset (the Python 3.11
# documentation from Debian's python3.11-doc, tokenised with a 4096-piece BPE; built once and cached), and trains a GPT
# on it on 4 local ranks (2-way tensor x 2-stage pipeline parallelism, CPU) under tenax-launch, which starts the ranks
# with Open MPI's mpirun, checkpoints through the run and restarts it from its newest checkpoint if a rank fails.
# About two minutes of training on a 2-core machine: the loss and tokens/s every 25 steps, the validation loss every
# 50, the step-efficiency summary (starvation, exposed communication) and goodput, a text sample from the trained
# model, and a report picture (loss curves, tokens/s, step phases) in the run directory.
# Each invocation gets its own run directory under build/runs/; extra arguments go to the training program
# (tenax-example-gpt --help).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh" "$root/build"
data="$root/build/datasets/pydoc-4k"
bash "$root/scripts/prepare-corpus.sh" "$data" --vocab 4096 --tool "$root/build/data/src/tenax-data"
source "$root/scripts/mpi-env.sh"
run="$root/build/runs/main-$(date +%Y%m%d-%H%M%S)"
echo "tenax: run directory $run"
status=0
"$root/build/launcher/src/tenax-launch" -n 4 --run-dir "$run" \
  --checkpoint-dir "$run/checkpoints" -- \
  "$root/build/examples/gpt/tenax-example-gpt" --data "$data" --tp 2 --pp 2 --steps 400 --log-every 25 \
  --validate-every 50 --checkpoint-every 100 "$@" || status=$?
# The picture of the run, also after a failure (what was measured until then).
/usr/bin/python3 "$root/scripts/tenax-report" "$run" || true
exit "$status"
