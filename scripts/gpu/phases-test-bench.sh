# Phase bodies of scripts/gpu-run.sh that build, test and benchmark (sourced by it; not run on its own): the targets,
# the ctest and benchmark phases, the PyTorch reference, the example program and compute-sanitizer. Each phase runs in
# its own process with the variables gpu-run.sh sets ($src, $work, $build, $logs, $PHASE_DEADLINE) and the
# environment the unpack phase wrote.
# shellcheck shell=bash disable=SC2154  # src, work, build and logs come from gpu-run.sh

# Targets: what tests/gpu, tests/kernels, tests/metrics (the CUDA timing test) and tests/training (the example's
# device test) build for the GPU, then the two GPU benchmarks. Targets the configuration did not create (no NCCL, say)
# are left out, and -k 0 builds everything that does not depend on a failed step.
test_targets=(tenax_kernels_cuda_test tenax_kernels_cpu_test nccl_communicator_test tenax_gpu_training_test
  tenax_checkpoint_device_test tenax_metrics_gpu_test tenax_op_profile_device_test tenax-example-lm)
bench_targets=(tenax_bench_kernels tenax-bench-training tenax_bench_checkpoint_device)

build_targets() {
  local have wanted=()
  if [ -f "$build/build.ninja" ]; then
    have=$(ninja -C "$build" -t targets all 2>/dev/null | sed 's/:.*//')
  else
    have=$(cmake --build "$build" --target help 2>/dev/null | sed 's/^\.\.\. //; s/ .*//')
  fi
  local t
  for t in "$@"; do
    if grep -qx "$t" <<<"$have"; then wanted+=("$t"); else echo "target $t does not exist in this configuration"; fi
  done
  ((${#wanted[@]} > 0)) || return 1
  echo "building ${wanted[*]} with ${GPU_RUN_JOBS:-$(nproc)} jobs"
  if [ -f "$build/build.ninja" ]; then
    ninja -C "$build" -k 0 -j "${GPU_RUN_JOBS:-$(nproc)}" "${wanted[@]}"
  else
    cmake --build "$build" -j "${GPU_RUN_JOBS:-$(nproc)}" --target "${wanted[@]}" -- -k
  fi
}

phase_build_tests() { build_targets "${test_targets[@]}"; }
phase_build_bench() { build_targets "${bench_targets[@]}"; }

# ctest until the phase's own deadline (--stop-time), so that it still writes its JUnit file when time runs out.
run_ctest() {
  local name=$1 jobs=$2 regex=$3
  local stop=$((${PHASE_DEADLINE:-0} - 5)) args=()
  # --stop-time is a time of day: leave it out if the deadline falls after midnight (UTC), rather than stop at once.
  if ((stop > 0)) && [ "$(date -u -d "@$stop" +%j)" = "$(date -u +%j)" ]; then
    args+=(--stop-time "$(date -u -d "@$stop" '+%H:%M:%S') +0000")
  fi
  cd "$build" || return 1
  TENAX_TEST_GPU=1 ctest -R "$regex" -j "$jobs" --output-on-failure --output-junit "$logs/junit-$name.xml" \
    --no-tests=error "${args[@]}"
}

phase_test_kernels() { run_ctest kernels 4 '^tenax_kernels_(cuda|cpu)_test\.'; }
# One at a time: the timing test measures the GPU, and the multi-rank tests each want the whole (single) GPU.
phase_test_gpu() {
  run_ctest gpu 1 '^(nccl_communicator_test|tenax_gpu_training_test|tenax_checkpoint_device_test|tenax_metrics_gpu_test|tenax_op_profile_device_test)\.np[0-9]+$|^tenax_example_lm_device_cuda\.np2$'
}

need_binary() { # a phase whose program was not built says so instead of a shell error
  [ -x "$1" ] || {
    echo "$1 was not built (see the build phases' logs)"
    return 1
  }
}

phase_bench_kernels() {
  # Kernels below 80% of the device-to-device copy rate are counted in the output ("N kernel(s) below 80%"), a result
  # rather than a failure of the run (--check would turn them into exit 1).
  need_binary "$build/bench/kernels/tenax-bench-kernels" || return 1
  "$build/bench/kernels/tenax-bench-kernels" --gpu-only
}

# The training benchmark on the one GPU: model FLOP utilisation against the bf16 matmul rate measured in the same run.
# A GPT the size of a small production model (hidden 2048, 16 heads, 8 layers, 1024 tokens, 32k tokens per step:
# about 92 TFLOP of matrix products per step, 0.2-0.5 s at 20-50% of an H100's bf16 rate). --phases then checks the
# engine's step-phase metrics (CUDA events) against the host clock between step ends.
#
# Then GPT-2 small (hidden 768, 12 heads, 12 layers) and medium (1024, 16, 24) at GPT-2's vocabulary and context, each
# with cuDNN's fused attention (TENAX_ATTENTION=fused: the run fails if cuDNN cannot run it) and with the batched core,
# so that the two are compared in the same run; the layers log which core they use.
phase_bench_training_gpt() {
  need_binary "$build/bench/training/tenax-bench-training" || return 1
  local bench=("$build/bench/training/tenax-bench-training" --device cuda --layouts reference --model gpt
    --precision bf16) rc=0
  export TENAX_LOG_LEVEL=info TENAX_LOG_SUBSYS=attention
  echo "=== GPT hidden 2048, TENAX_ATTENTION=auto"
  mpirun -np 1 "${bench[@]}" --hidden 2048 --heads 16 --layers 8 --vocab 32768 --seq-len 1024 --batch 32 \
    --micro-batch 8 --steps 6 --warmup 2 --phases || rc=1
  local size core
  for size in "768 12 12" "1024 16 24"; do
    read -r h heads layers <<<"$size"
    for core in fused batched; do
      echo "=== GPT-2 hidden $h, heads $heads, layers $layers: TENAX_ATTENTION=$core"
      TENAX_ATTENTION=$core mpirun -np 1 -x TENAX_ATTENTION "${bench[@]}" --hidden "$h" --heads "$heads" \
        --layers "$layers" --vocab 50257 --seq-len 1024 --batch 32 --micro-batch 8 --steps 6 --warmup 2 || rc=1
    done
  done
  return $rc
}
# Where a GPT-2 small step's time goes on the GPU, per kernel call (the op profile, CUDA events; docs/metrics.md): the
# reference row, then the same again with the profile over its timed steps (what profiling costs), in a run of its own
# so that the profile does not touch the timed runs above. Rank 0 prints the profile.
phase_profile_gpt() {
  need_binary "$build/bench/training/tenax-bench-training" || return 1
  TENAX_ATTENTION=fused mpirun -np 1 -x TENAX_ATTENTION "$build/bench/training/tenax-bench-training" --device cuda \
    --layouts reference --model gpt --precision bf16 --hidden 768 --heads 12 --layers 12 --vocab 50257 --seq-len 1024 \
    --batch 32 --micro-batch 8 --steps 3 --warmup 1 --op-profile
}
# A checkpoint of device-memory shards: the training stream's stall against a device-to-host copy of the same bytes.
phase_bench_checkpoint() {
  need_binary "$build/bench/checkpoint/tenax-bench-checkpoint-device" || return 1
  rm -rf "$work/bench-ckpt"
  mpirun -np 1 "$build/bench/checkpoint/tenax-bench-checkpoint-device" --sizes 256M,1G --reps 3 --dir "$work/bench-ckpt"
  local rc=$?
  rm -rf "$work/bench-ckpt"
  return $rc
}
# The MLP model at the size bench_training.cpp's header names, and a GPT in fp32 for the fp32/bf16 ratio.
phase_bench_training_more() {
  need_binary "$build/bench/training/tenax-bench-training" || return 1
  local rc=0
  mpirun -np 1 "$build/bench/training/tenax-bench-training" --device cuda --layouts reference --model mlp \
    --precision bf16 --hidden 2048 --layers 8 --vocab 32768 --seq-len 512 --batch 64 --micro-batch 8 --steps 10 \
    --warmup 2 || rc=1
  mpirun -np 1 "$build/bench/training/tenax-bench-training" --device cuda --layouts reference --model gpt \
    --precision fp32 --hidden 1024 --heads 16 --layers 8 --vocab 32768 --seq-len 1024 --batch 32 --micro-batch 8 \
    --steps 5 --warmup 1 || rc=1
  return $rc
}

phase_torch_reference() {
  # PyTorch's cuBLAS and SDPA on the same GPU (bf16 and fp16 products, copy bandwidth, causal attention), with the
  # machine's own library path: the carried libraries are not for Python.
  command -v python3 >/dev/null || {
    echo "no python3 here (the GPU image's python3 has PyTorch)"
    return 1
  }
  LD_LIBRARY_PATH=${ORIG_LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1 python3 "$src/scripts/gpu/torch-reference.py"
}

phase_example_lm() {
  # The example program end to end on one GPU against the same run on the CPU (fp32, so the losses should agree to
  # about 1e-4 relative), then bf16 with a checkpoint from device memory half way.
  local common=(--steps 40 --vocab 512 --hidden 256 --layers 4 --seq-len 64 --batch 16 --micro-batch 4)
  need_binary "$build/examples/mlp_lm/tenax-example-lm" || return 1
  local rc=0
  echo "=== cpu fp32"
  mpirun -np 1 "$build/examples/mlp_lm/tenax-example-lm" --device cpu "${common[@]}" --checkpoint-dir none || rc=1
  echo "=== cuda fp32"
  mpirun -np 1 "$build/examples/mlp_lm/tenax-example-lm" --device cuda "${common[@]}" --checkpoint-dir none || rc=1
  echo "=== cuda bf16, checkpoint every 20 steps"
  rm -rf "$work/example-ckpt"
  mpirun -np 1 "$build/examples/mlp_lm/tenax-example-lm" --device cuda --precision bf16 "${common[@]}" \
    --checkpoint-dir "$work/example-ckpt" --checkpoint-every 20 || rc=1
  return $rc
}

phase_sanitize() {
  # compute-sanitizer's memcheck over the CUDA kernel tests: out-of-bounds and misaligned accesses in kernels that
  # never ran on a GPU before. Slow (each kernel is instrumented), so it runs last on whatever time is left.
  # On PATH, or beside the nvcc in use, or where the toolkit installs it.
  local sanitizer
  sanitizer=$(command -v compute-sanitizer || true)
  for candidate in "$(dirname "${NVCC:-/usr/local/cuda/bin/nvcc}")/compute-sanitizer" \
    /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [ -n "$sanitizer" ] && break
    [ -x "$candidate" ] && sanitizer=$candidate
  done
  [ -n "$sanitizer" ] || {
    echo "compute-sanitizer not found (PATH, beside nvcc, /usr/local/cuda): the toolkit here does not include it"
    return 1
  }
  need_binary "$build/tests/kernels/tenax_kernels_cuda_test" || return 1
  TENAX_TEST_GPU=1 "$sanitizer" --tool memcheck --error-exitcode 99 --print-limit 20 \
    "$build/tests/kernels/tenax_kernels_cuda_test" --gtest_brief=1
}
