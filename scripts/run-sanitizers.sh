#!/usr/bin/env bash
# The sanitizer and fuzzing half of the test command (scripts/run-tests.sh runs it after the main suite).
#
# One clang build (CUDA off: nvcc does not instrument host code with clang's sanitizers) with AddressSanitizer,
# UndefinedBehaviorSanitizer (any report is fatal) and libFuzzer's coverage instrumentation, then:
#   1. the unit, fuzz-replay and multi-rank tests under ASan+UBSan (the real-Slurm and end-to-end tests are left to the
#      main build: an uninstrumented slurmd cannot load an ASan-built plugin, and they exercise no code the others
#      do not);
#   2. every libFuzzer harness (tests/fuzz/*_fuzz.cpp) for TENAX_FUZZ_SECONDS (default 15) on a copy of its corpus and
#      regression inputs; any crash, sanitizer report, time-out or memory blow-up fails the run and leaves the input
#      in <build>/fuzz-artifacts/.
# A longer fuzzing run: TENAX_FUZZ_SECONDS=1800 bash scripts/run-sanitizers.sh
#   scripts/run-sanitizers.sh [BUILD_DIR] [ctest arguments...]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build-sanitize}
shift || true
# Absolute: the tests and fuzzers below run from inside it.
build=$(realpath -m -- "$build")
source "$root/scripts/script-settings.sh"
seconds=$(tenax_setting_count TENAX_FUZZ_SECONDS 15 31536000)
jobs=$(tenax_setting_count TENAX_BUILD_JOBS "$(nproc)" 4096)
test_jobs=$(tenax_setting_count TENAX_TEST_JOBS 2 4096)

flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fsanitize=fuzzer-no-link -fno-omit-frame-pointer"
if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTENAX_WITH_CUDA=OFF -DTENAX_FUZZ=ON -DTENAX_BUILD_BENCH=OFF \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined"
fi
cmake --build "$build" -j "$jobs"

source "$root/scripts/mpi-env.sh"
# Open MPI unloads its components (mca_*.so) at MPI_Finalize; their allocations then have no module to name, and the
# suppressions below could not tell them from tenax's. Keep them loaded.
export OMPI_MCA_mca_base_component_disable_dlclose=1
# halt_on_error: the first report fails the test. Open MPI's own allocations that live until exit are not tenax's
# leaks: scripts/lsan.supp names their libraries, and the slow unwinder (fast_unwind_on_malloc=0) is what lets a stack
# through those libraries (built without frame pointers) be attributed to them; leak checking stays on for the rest.
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/scripts/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

cd "$build"
ctest --output-on-failure --timeout 900 -j "$test_jobs" -L "unit|mpi|fuzz" -LE "slurm|e2e|install" "$@"

# Each fuzzer for a bounded time.
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
failed=()
while read -r name; do
  [ -n "$name" ] || continue
  work=$(mktemp -d)
  cp -r "$root/tests/fuzz/corpus/$name/." "$work/" 2>/dev/null || true
  seeds=("$work")
  [ -d "$root/tests/fuzz/regressions/$name" ] && seeds+=("$root/tests/fuzz/regressions/$name")
  echo "fuzz: $name for ${seconds}s"
  if ! "$build/tests/fuzz/${name}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$artifacts/${name}-" -print_final_stats=1 "${seeds[@]}" > "$artifacts/$name.log" 2>&1; then
    failed+=("$name")
    tail -n 60 "$artifacts/$name.log"
  else
    grep -E "^stat::number_of_executed_units|^Done" "$artifacts/$name.log" | sed "s/^/fuzz: $name: /" || true
  fi
  rm -rf "$work"
done < "$build/fuzzers.txt"
if ((${#failed[@]})); then
  echo "fuzz: failed: ${failed[*]} (inputs in $artifacts)" >&2
  exit 1
fi
echo "fuzz: every harness ran ${seconds}s without a finding"
