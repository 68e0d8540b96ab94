#!/usr/bin/env bash
# The whole GPU suite in one command on a GPU machine that reaches no package registry: unpacks the Debian
# packages that scripts/gpu-prepare.sh put in .deps/ into a private prefix (never into /), configures tenax with CUDA
# for the GPU it finds, builds only the GPU-relevant targets, runs every GPU test with TENAX_TEST_GPU=1, then the GPU
# benchmarks, and writes everything into OUT_DIR as at most 8 files (docs/gpu-path.md, "Running the GPU suite").
#
#   bash scripts/gpu-run.sh OUT_DIR          # from anywhere in a copy of the tree that includes .deps/
#
# Every phase has a time budget inside one overall deadline (GPU_RUN_BUDGET_S, default 540 s, so that the run ends
# inside 10 minutes), and a phase that fails or runs out of time does not stop the later phases
# that do not depend on it. Whatever happens, OUT_DIR/summary.txt says which phase failed, and the other files hold
# what was produced. Exit status: 0 when every phase passed, 1 when any failed or timed out, 2 on bad usage.
#
# Knobs (environment): GPU_RUN_BUDGET_S (overall seconds), GPU_RUN_WORK (scratch, default /tmp/tenax-gpu-run; a second
# call on a still-warm machine reuses its build), GPU_RUN_ARCH (CUDA architectures, default from nvidia-smi, else
# "80;90"), GPU_RUN_JOBS (build jobs, default nproc), GPU_RUN_SKIP (space-separated phase names to skip),
# GPU_RUN_SLOW (multiplies every phase's budget, for rehearsals on slower machines: scripts/gpu-chroot-test.sh),
# GPU_RUN_FILL=all (use every carried fill library even where the machine has its own: rehearses a barer image),
# GPU_RUN_UNPACK=python (unpack with scripts/gpu/deb-extract.py even where dpkg-deb exists), CUDACXX (the nvcc to use).
set -u -o pipefail

self=$(readlink -f "${BASH_SOURCE[0]}")
src=$(cd "$(dirname "$self")/.." && pwd)
work=${GPU_RUN_WORK:-/tmp/tenax-gpu-run}
prefix=$work/prefix
build=$work/build
logs=$work/logs

# ---------------------------------------------------------------------------------------------------------------------
# Phase bodies. Each runs in its own process (bash gpu-run.sh --phase NAME OUT), under `timeout`, with the environment
# that the unpack phase wrote to $work/env.sh; its output goes to $logs/NAME.log.

phase_unpack() {
  local manifest=$src/.deps/MANIFEST
  [ -f "$manifest" ] || {
    echo "no .deps/MANIFEST: run scripts/gpu-prepare.sh on a machine with apt and copy .deps/ with the tree"
    return 1
  }
  if cmp -s "$manifest" "$prefix/MANIFEST"; then
    echo "prefix $prefix already holds this MANIFEST: not unpacked again"
  else
    rm -rf "$prefix"
    mkdir -p "$prefix/core" "$prefix/fill"
    local use_dpkg=1
    if [ "${GPU_RUN_UNPACK:-}" = python ] || ! command -v dpkg-deb >/dev/null; then
      use_dpkg=0
      echo "unpacking with scripts/gpu/deb-extract.py (no dpkg-deb here, or GPU_RUN_UNPACK=python)"
    fi
    local class pkg file
    while read -r class pkg _ file; do
      [[ "$class" == core || "$class" == fill ]] || continue
      [ -f "$src/.deps/$file" ] || {
        echo ".deps/$file (package $pkg) is missing: run scripts/gpu-prepare.sh again and copy .deps/ with the tree"
        return 1
      }
      if [ "$use_dpkg" = 1 ]; then
        dpkg-deb -x "$src/.deps/$file" "$prefix/$class" || return 1
      else
        python3 "$src/scripts/gpu/deb-extract.py" "$prefix/$class" "$src/.deps/$file" || return 1
      fi
    done <"$manifest"
    cp "$manifest" "$prefix/MANIFEST"
  fi

  # Fill libraries: link only those whose SONAME this machine lacks, so its own (possibly newer) copies win.
  rm -rf "$prefix/fill-lib"
  mkdir -p "$prefix/fill-lib"
  local f so used=() skipped=()
  while IFS= read -r -d '' f; do
    so=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [ -n "$so" ] || continue
    if [ "${GPU_RUN_FILL:-missing}" != all ] && have_system_lib "$so"; then
      skipped+=("$so")
    else
      ln -sfn "$f" "$prefix/fill-lib/$so"
      used+=("$so")
    fi
  done < <(find "$prefix/fill" -type f -name 'lib*.so*' -print0)
  echo "fill libraries taken from .deps (this machine lacks them): ${used[*]:-none}"
  echo "fill libraries this machine has itself (its copies are used): ${skipped[*]:-none}"

  write_env >"$work/env.sh"
  # shellcheck source=/dev/null
  . "$work/env.sh"
  echo "--- environment for the build and the runs ($work/env.sh)"
  cat "$work/env.sh"

  # Every carried ELF file tenax loads must resolve against prefix + this machine (this also catches a glibc or
  # libstdc++ that is too old: "version `GLIBC_2.36' not found").
  echo "--- ldd of the carried libraries and programs"
  local bad=0 out
  while IFS= read -r -d '' f; do
    [ "$(head -c4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    [[ "$f" =~ $optional_plugins ]] && continue
    out=$(ldd "$f" 2>&1 | grep -E 'not found|version .* not found' || true)
    if [ -n "$out" ]; then
      echo "UNRESOLVED in ${f#"$prefix"/}:"
      echo "$out"
      bad=1
    fi
  done < <(find "$prefix/core" -type f \( -name '*.so*' -o -path '*/bin/*' \) -print0; find "$prefix/fill-lib" -type l -print0)
  [ "$bad" = 0 ] || {
    echo "some carried files do not resolve here (above): add the missing packages to scripts/gpu/debian-packages.txt"
    return 1
  }
  echo "all carried libraries and programs resolve"

  echo "--- Open MPI from the prefix"
  mpicc -showme || return 1
  mpirun -np 2 echo "mpirun from the prefix started this" || {
    echo "mpirun from the private prefix does not start two processes"
    return 1
  }
}

phase_configure() {
  local arch=${GPU_RUN_ARCH:-}
  [ -n "$arch" ] || arch=$(cat "$work/arch" 2>/dev/null || echo "80;90")
  local generator=Ninja
  command -v ninja >/dev/null || generator="Unix Makefiles"
  local args=(
    -S "$src" -B "$build" -G "$generator"
    -DCMAKE_BUILD_TYPE=RelWithDebInfo
    -DTENAX_WITH_CUDA=ON -DTENAX_WITH_SLURM=OFF
    "-DCMAKE_CUDA_ARCHITECTURES=$arch"
    -DCMAKE_CUDA_COMPILER="$NVCC"
    # Open MPI through its wrapper (relocated by OPAL_PREFIX), HDF5 through the Debian layout's serial root, OpenBLAS
    # by vendor name; cxxopts, nlohmann-json and GTest through their CMake config files under the prefix.
    -DMPI_C_COMPILER="$work/bin/mpicc"
    -DMPIEXEC_EXECUTABLE="$work/bin/mpiexec"
    -DHDF5_ROOT="$P/usr/lib/x86_64-linux-gnu/hdf5/serial"
    -DBLA_VENDOR=OpenBLAS
    "-DCMAKE_PREFIX_PATH=$P/usr;$P/usr/lib/x86_64-linux-gnu/openblas-pthread"
    "-DCMAKE_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu/openblas-pthread"
    # SentencePiece through the carried pkgconf, which env.sh confines to the prefix (PKG_CONFIG_LIBDIR, _SYSROOT_DIR).
    -DPKG_CONFIG_EXECUTABLE="$P/usr/bin/pkgconf"
  )
  [ -n "${GPU_RUN_NCCL_SHIM:-}" ] && args+=("-DNCCL_INCLUDE_DIR=$GPU_RUN_NCCL_SHIM/include" "-DNCCL_LIBRARY=$GPU_RUN_NCCL_SHIM/lib/libnccl.so")
  [ -n "${CUDNN_INCLUDE:-}" ] && args+=("-DTENAX_CUDNN_INCLUDE_DIR=$CUDNN_INCLUDE")
  # The frontend path only where gpu-prepare.sh carried its headers: CMake takes a path it is given as found.
  [ -f "$src/.deps/cudnn-frontend/include/cudnn_frontend.h" ] &&
    args+=("-DTENAX_CUDNN_FRONTEND_INCLUDE_DIR=$src/.deps/cudnn-frontend/include")
  [ -n "${CUDNN_LIBRARY:-}" ] && args+=("-DTENAX_CUDNN_LIBRARY=$CUDNN_LIBRARY")
  echo "cmake ${args[*]}"
  cmake "${args[@]}" || return 1
  # Say where each dependency came from: the prefix is expected; anything else is this machine's own copy.
  echo "--- dependencies as configured"
  grep -E '^(PKG_CONFIG_EXECUTABLE|TENAX_SENTENCEPIECE_LIBRARY|MPI_C_LIB_NAMES|MPI_mpi_LIBRARY|MPI_C_HEADER_DIR|MPIEXEC_EXECUTABLE|HDF5_hdf5_LIBRARY_RELEASE|HDF5_C_LIBRARY_hdf5|HDF5_C_INCLUDE_DIR|BLAS_openblas_LIBRARY|TENAX_CBLAS_INCLUDE_DIR|cxxopts_DIR|nlohmann_json_DIR|GTest_DIR|NCCL_INCLUDE_DIR|NCCL_LIBRARY|CMAKE_CUDA_COMPILER|CMAKE_CUDA_ARCHITECTURES|CUDAToolkit_LIBRARY_DIR|CUDA_cublas_LIBRARY|TENAX_CUDNN_INCLUDE_DIR|TENAX_CUDNN_FRONTEND_INCLUDE_DIR|TENAX_CUDNN_LIBRARY)[:=]' \
    "$build/CMakeCache.txt" || true
  grep -q '^TENAX_HAVE_NCCL' "$build/CMakeCache.txt" 2>/dev/null || true
}

# The build, test and benchmark phases.
# shellcheck source=scripts/gpu/phases-test-bench.sh
. "$src/scripts/gpu/phases-test-bench.sh"

# ---------------------------------------------------------------------------------------------------------------------
# Helpers.

optional_plugins='openmpi3/mca_(btl_openib|btl_ofi|btl_uct|mtl_ofi|mtl_psm|mtl_psm2|pml_ucx|osc_ucx|spml_ucx|atomic_ucx|sshmem_ucx|coll_ucc|scoll_ucc)\.so|libmca_common_(ucx|ofi|verbs)\.so|liboshmem|libmpi_java|fortran|usempi|mpifh|/bin/(osh|shmem|mpif|mpijava)|oshmem_info'

have_system_lib() { # SONAME known to the dynamic loader's cache or present in the usual directories
  if command -v ldconfig >/dev/null && ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$1 (libc6,x86-64"; then
    return 0
  fi
  local d
  for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64; do
    [ -e "$d/$1" ] && return 0
  done
  return 1
}

write_env() { # the environment of every later phase, as shell code
  local P=$prefix/core
  local lib=$P/usr/lib/x86_64-linux-gnu pmix=$P/usr/lib/x86_64-linux-gnu/pmix2
  mkdir -p "$work/bin"
  # Debian names these through update-alternatives, which dpkg -x does not run.
  ln -sfn "$P/usr/bin/mpicc.openmpi" "$work/bin/mpicc"
  ln -sfn "$P/usr/bin/mpirun.openmpi" "$work/bin/mpirun"
  ln -sfn "$P/usr/bin/mpiexec.openmpi" "$work/bin/mpiexec"
  cat <<EOF
export P='$P'
export ORIG_LD_LIBRARY_PATH='${ORIG_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}}'
export PATH='$work/bin:$P/usr/bin:$CUDA_ROOT/bin':"\$PATH"
# The carried libraries first, then the machine's own path, then the fill libraries it lacks.
# cuDNN's directory and the toolkit's follow (cuDNN opens its engine libraries and NVRTC by soname).
export LD_LIBRARY_PATH='$lib:$lib/openmpi/lib:$pmix/lib:$lib/openblas-pthread:${NCCL_LIB_DIR:+$NCCL_LIB_DIR:}'"\${ORIG_LD_LIBRARY_PATH}"':$prefix/fill-lib${CUDNN_LIBRARY:+:$(dirname "$CUDNN_LIBRARY")}:$CUDA_ROOT/lib64:$CUDA_ROOT/lib'
# Open MPI and PMIx relocated into the prefix: their plugins, help files and wrapper data follow these.
export OPAL_PREFIX='$P/usr'
export PMIX_PREFIX='$pmix' PMIX_LIBDIR='$pmix/lib' PMIX_PKGLIBDIR='$pmix/lib/pmix'
export PMIX_DATAROOTDIR='$pmix/share' PMIX_DATADIR='$pmix/share' PMIX_PKGDATADIR='$pmix/share/pmix'
# One node, no ssh: launch locally; the plugins for UCX, libfabric, verbs and PSM are not carried (and not needed).
export OMPI_MCA_plm=isolated OMPI_MCA_mca_base_component_show_load_errors=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# pkg-config (the carried pkgconf) sees only the prefix, and prefixes its /usr paths with it.
export PKG_CONFIG_LIBDIR='$lib/pkgconfig:$P/usr/share/pkgconfig' PKG_CONFIG_SYSROOT_DIR='$P'
unset PKG_CONFIG_PATH
export NVCC='$NVCC' CUDA_ROOT='$CUDA_ROOT'
export GPU_RUN_NCCL_SHIM='${GPU_RUN_NCCL_SHIM:-}'
export CUDNN_INCLUDE='${CUDNN_INCLUDE:-}' CUDNN_LIBRARY='${CUDNN_LIBRARY:-}'
EOF
}

# The CUDA toolkit: $CUDACXX, nvcc on PATH, /usr/local/cuda, or the toolkit wheels of the machine's Python.
find_cuda() {
  NVCC=${CUDACXX:-}
  [ -n "$NVCC" ] || NVCC=$(command -v nvcc || true)
  [ -n "$NVCC" ] || { [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc; }
  if [ -z "$NVCC" ] && command -v python3 >/dev/null; then
    NVCC=$(python3 -c 'import nvidia, os; [print(os.path.join(p, "cu13/bin/nvcc")) for p in nvidia.__path__ if os.path.exists(os.path.join(p, "cu13/bin/nvcc"))]' 2>/dev/null | head -n1)
  fi
  [ -n "$NVCC" ] || return 1
  NVCC=$(readlink -f "$NVCC")
  CUDA_ROOT=$(dirname "$(dirname "$NVCC")")
}

# NCCL: the toolkit's own (this project's CMake looks beside cudart), else the machine's nvidia-nccl wheel, whose
# library has only its versioned name: a shim folder gives it the plain name the linker looks for.
find_nccl() {
  local inc
  for inc in "$CUDA_ROOT/include" "$CUDA_ROOT/targets/x86_64-linux/include" /usr/include; do
    [ -f "$inc/nccl.h" ] && return 0
  done
  local wheel
  wheel=$(LD_LIBRARY_PATH=${ORIG_LD_LIBRARY_PATH:-} python3 -c 'import nvidia, os; [print(os.path.join(p, "nccl")) for p in nvidia.__path__ if os.path.exists(os.path.join(p, "nccl/include/nccl.h"))]' 2>/dev/null | head -n1)
  [ -n "$wheel" ] && [ -f "$wheel/lib/libnccl.so.2" ] || return 1
  GPU_RUN_NCCL_SHIM=$work/nccl
  mkdir -p "$GPU_RUN_NCCL_SHIM/lib"
  ln -sfn "$wheel/include" "$GPU_RUN_NCCL_SHIM/include"
  ln -sfn "$wheel/lib/libnccl.so.2" "$GPU_RUN_NCCL_SHIM/lib/libnccl.so.2"
  ln -sfn libnccl.so.2 "$GPU_RUN_NCCL_SHIM/lib/libnccl.so"
  NCCL_LIB_DIR=$GPU_RUN_NCCL_SHIM/lib
}

# cuDNN (fused attention): its headers from the toolkit, else the machine's nvidia-cudnn wheel, else the copy
# gpu-prepare.sh carried; its library from the toolkit or the wheel. The cudnn-frontend headers are always the carried
# ones (.deps/cudnn-frontend). Missing pieces leave the build without fused attention: not a preflight failure.
find_cudnn() {
  local inc wheel
  for inc in "$CUDA_ROOT/include" "$CUDA_ROOT/targets/x86_64-linux/include" /usr/include /usr/include/x86_64-linux-gnu; do
    [ -f "$inc/cudnn.h" ] && {
      CUDNN_INCLUDE=$inc
      break
    }
  done
  for inc in "$CUDA_ROOT/lib64" "$CUDA_ROOT/lib" /usr/lib/x86_64-linux-gnu; do
    [ -f "$inc/libcudnn.so.9" ] && {
      CUDNN_LIBRARY=$inc/libcudnn.so.9
      break
    }
  done
  wheel=$(LD_LIBRARY_PATH=${ORIG_LD_LIBRARY_PATH:-} python3 -c 'import nvidia, os; [print(os.path.join(p, "cudnn")) for p in nvidia.__path__ if os.path.exists(os.path.join(p, "cudnn/lib/libcudnn.so.9"))]' 2>/dev/null | head -n1)
  if [ -n "$wheel" ]; then
    [ -n "$CUDNN_LIBRARY" ] || CUDNN_LIBRARY=$wheel/lib/libcudnn.so.9
    [ -n "$CUDNN_INCLUDE" ] || { [ -f "$wheel/include/cudnn.h" ] && CUDNN_INCLUDE=$wheel/include; }
  fi
  [ -n "$CUDNN_INCLUDE" ] || { [ -f "$src/.deps/cudnn-include/cudnn.h" ] && CUDNN_INCLUDE=$src/.deps/cudnn-include; }
  [ -n "$CUDNN_INCLUDE" ] && [ -n "$CUDNN_LIBRARY" ] && [ -f "$src/.deps/cudnn-frontend/include/cudnn_frontend.h" ]
}

cap_file() { # keep FILE under $2 bytes: its first MiB and as much of its end as fits, with a line saying so
  local f=$1 max=$2 size
  size=$(stat -c %s "$f" 2>/dev/null || echo 0)
  ((size > max)) || return 0
  local tmp=$f.cap
  {
    head -c 1048576 "$f"
    printf '\n\n[... %s bytes cut by gpu-run.sh to stay under 16 MiB per file ...]\n\n' "$((size - max + 1048576 + 200))"
    tail -c $((max - 1048576 - 200)) "$f"
  } >"$tmp" && mv "$tmp" "$f"
}

now() { date +%s; }

failure_line() { # the line of a log that best says why it failed: tenax's own error, ctest's count, else the last
  local pattern line
  for pattern in 'ERROR [a-z]+: ' 'tests failed out of' '[Ee]rror|[Ff]ail|not found|cannot|refuse|[Uu]sage|no usable|missing' '.'; do
    line=$(grep -vE '^[[:space:]]*$|^-+$' "$1" | grep -E "$pattern" | tail -n1)
    [ -n "$line" ] && break
  done
  cut -c1-200 <<<"$line"
}

# ---------------------------------------------------------------------------------------------------------------------
# One phase, in its own process.

if [ "${1:-}" = --phase ]; then
  name=$2
  # shellcheck source=/dev/null
  [ -f "$work/env.sh" ] && [ "$name" != unpack ] && . "$work/env.sh"
  if [ "$name" = unpack ]; then
    # shellcheck source=/dev/null
    . "$work/pre.sh"
  fi
  "phase_${name//-/_}"
  exit $?
fi

# ---------------------------------------------------------------------------------------------------------------------
# The driver.

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: bash scripts/gpu-run.sh OUT_DIR   (see docs/gpu-path.md, \"Running the GPU suite\")" >&2
  exit 2
fi
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
budget=${GPU_RUN_BUDGET_S:-540}
[[ "$budget" =~ ^[0-9]+$ ]] && ((budget >= 60)) || {
  echo "GPU_RUN_BUDGET_S=$budget: give the overall budget in whole seconds, at least 60" >&2
  exit 2
}
[[ "${GPU_RUN_SLOW:-1}" =~ ^[1-9][0-9]*$ ]] || {
  echo "GPU_RUN_SLOW=$GPU_RUN_SLOW: give a whole factor of at least 1" >&2
  exit 2
}
t0=$(now)
deadline=$((t0 + budget))
reserve=25 # seconds kept for writing OUT_DIR at the end
mkdir -p "$work" "$logs"
rm -f "$logs"/*.log "$logs"/junit-*.xml
: >"$work/phases.tsv"
failed=()

record() { # name status seconds note
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$work/phases.tsv"
  printf 'gpu-run: %-22s %-8s %5ss  %s\n' "$1" "$2" "$3" "$4"
  [ "$2" = ok ] || [ "$2" = skipped ] || failed+=("$1")
}

# run_phase NAME BUDGET_S [NEEDS...]: runs phase NAME for at most BUDGET_S seconds (less if the overall deadline is
# nearer); skipped when a phase it needs did not pass or it is listed in GPU_RUN_SKIP.
declare -A status
run_phase() {
  local name=$1 want=$2
  shift 2
  local need
  for need in "$@"; do
    if [ "${status[$need]:-}" != ok ]; then
      status[$name]=skipped
      record "$name" skipped 0 "needs $need, which did not pass"
      return
    fi
  done
  if [[ " ${GPU_RUN_SKIP:-} " == *" $name "* ]]; then
    status[$name]=skipped
    record "$name" skipped 0 "GPU_RUN_SKIP"
    return
  fi
  want=$((want * ${GPU_RUN_SLOW:-1}))
  local left=$((deadline - reserve - $(now)))
  local limit=$((want < left ? want : left))
  if ((limit < 10)); then
    status[$name]=skipped
    record "$name" skipped 0 "no time left in GPU_RUN_BUDGET_S=$budget"
    return
  fi
  local start rc
  start=$(now)
  echo "gpu-run: $name (up to ${limit}s) ..."
  PHASE_DEADLINE=$((start + limit)) timeout -k 5 "$limit" bash "$self" --phase "$name" "$out" >"$logs/$name.log" 2>&1
  rc=$?
  local took=$(($(now) - start))
  if [ $rc = 0 ]; then
    status[$name]=ok
    record "$name" ok "$took" ""
  elif [ $rc = 124 ] || [ $rc = 137 ]; then
    status[$name]=timeout
    record "$name" timeout "$took" "stopped after its ${limit}s (logs/$name.log)"
  else
    status[$name]=failed
    record "$name" failed "$took" "exit $rc: $(failure_line "$logs/$name.log")"
  fi
}

# --- preflight (in this process: quick, and everything later depends on it)
sysinfo=$work/system.txt
{
  echo "=== gpu-run.sh $(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${budget}s, source $src ($(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
  echo "=== os"
  cat /etc/os-release 2>/dev/null
  uname -a
  echo "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null)"
  echo "cpus: $(nproc), memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "=== tools"
  for tool in cmake ctest ninja make gcc g++ nvcc nvidia-smi python3 dpkg-deb readelf ldd compute-sanitizer; do
    printf '%-18s %s\n' "$tool" "$(command -v "$tool" || echo 'not found')"
  done
  cmake --version 2>/dev/null | head -n1
  g++ --version 2>/dev/null | head -n1
  ninja --version 2>/dev/null
} >"$sysinfo" 2>&1

pre_ok=1
pre_note=
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
need_glibc=$(awk '$1 == "glibc_min" {print $2}' "$src/.deps/MANIFEST" 2>/dev/null)
need_by=$(awk '$1 == "glibc_min" {print $3}' "$src/.deps/MANIFEST" 2>/dev/null)
if [ ! -f "$src/.deps/MANIFEST" ]; then
  pre_ok=0
  pre_note="no .deps/MANIFEST: run scripts/gpu-prepare.sh on a machine with apt, then copy .deps/ with the tree"
elif [ -z "$glibc" ]; then
  pre_ok=0
  pre_note="cannot read this machine's glibc version (getconf GNU_LIBC_VERSION): not a glibc system?"
elif [ "$(printf '%s\n%s\n' "$glibc" "$need_glibc" | sort -V | head -n1)" != "$need_glibc" ]; then
  pre_ok=0
  pre_note="glibc $glibc here is older than $need_glibc, which the Debian 12 packages in .deps/ need ($need_by): they cannot run on this image; build a CUDA-only subset or prepare packages of this OS's release"
fi
for tool in cmake g++ readelf ldd timeout; do
  command -v "$tool" >/dev/null || {
    pre_ok=0
    pre_note="$tool is not on PATH"
  }
done
command -v dpkg-deb >/dev/null || command -v python3 >/dev/null || {
  pre_ok=0
  pre_note="neither dpkg-deb nor python3 is here to unpack .deps"
}
NVCC="" CUDA_ROOT="" GPU_RUN_NCCL_SHIM="" NCCL_LIB_DIR=""
ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
if ! find_cuda; then
  pre_ok=0
  pre_note="no nvcc: set CUDACXX, put nvcc on PATH, or install the CUDA toolkit at /usr/local/cuda"
elif ! find_nccl; then
  echo "NCCL: no nccl.h in $CUDA_ROOT nor in the machine's nvidia-nccl wheel: the NCCL tests are not built" >>"$sysinfo"
fi
CUDNN_INCLUDE="" CUDNN_LIBRARY=""
if [ -n "$CUDA_ROOT" ] && ! find_cudnn; then
  echo "cuDNN: headers ${CUDNN_INCLUDE:-not found}, library ${CUDNN_LIBRARY:-not found}, frontend .deps/cudnn-frontend: the build has no fused attention" >>"$sysinfo"
fi
{
  echo "cuDNN: headers ${CUDNN_INCLUDE:-none}, library ${CUDNN_LIBRARY:-none}"
  echo "nvcc: ${NVCC:-none} (toolkit root ${CUDA_ROOT:-none})"
  [ -n "$NVCC" ] && "$NVCC" --version | tail -n2
  echo "NCCL shim (from the Python wheel): ${GPU_RUN_NCCL_SHIM:-not needed or not found}"
} >>"$sysinfo" 2>&1
# The GPU's architecture: sm_90 for an H100/H200; both 80 and 90 when nvidia-smi cannot say.
arch=${GPU_RUN_ARCH:-}
if [ -z "$arch" ] && command -v nvidia-smi >/dev/null; then
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')
  [[ "$arch" =~ ^[0-9]+$ ]] || arch=
fi
echo "${arch:-80;90}" >"$work/arch"
{
  echo "CUDA architectures: $(cat "$work/arch")"
  echo "=== nvidia-smi"
  nvidia-smi 2>&1 || echo "(nvidia-smi failed or is missing)"
  nvidia-smi topo -m 2>&1 || true
} >>"$sysinfo" 2>&1
declare -p NVCC CUDA_ROOT GPU_RUN_NCCL_SHIM NCCL_LIB_DIR CUDNN_INCLUDE CUDNN_LIBRARY ORIG_LD_LIBRARY_PATH 2>/dev/null | sed 's/^declare -- /export /' >"$work/pre.sh"
if [ "$pre_ok" = 1 ]; then
  status[preflight]=ok
  record preflight ok $(($(now) - t0)) "glibc $glibc (needs $need_glibc), GPU arch $(cat "$work/arch")"
else
  status[preflight]=failed
  record preflight failed $(($(now) - t0)) "$pre_note"
fi

# --- the phases, in order of what matters most if time runs short
run_phase unpack 90 preflight
run_phase configure 120 unpack
run_phase build-tests 300 configure
# Later phases need only the configuration: a build that failed in part (ninja -k 0) still leaves the programs that
# did build, and each phase says which of its programs is missing.
run_phase test-kernels 150 configure
run_phase test-gpu 200 configure
run_phase build-bench 150 configure
run_phase bench-kernels 90 configure
run_phase bench-training-gpt 200 configure
run_phase profile-gpt 60 configure
run_phase bench-checkpoint 60 configure
run_phase torch-reference 60 preflight
run_phase example-lm 60 configure
run_phase bench-training-more 120 configure
run_phase sanitize 150 configure

# --- OUT_DIR: at most 8 files, each under 16 MiB
files_cap=$((15 * 1024 * 1024))
summary=$out/summary.txt
total=$(($(now) - t0))
{
  if ((${#failed[@]} == 0)); then
    echo "RESULT: every phase passed (${total}s of ${budget}s)"
  else
    echo "RESULT: FAILED phases: ${failed[*]} (${total}s of ${budget}s)"
  fi
  echo "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -n1 || echo 'no nvidia-smi')"
  echo
  printf '%-22s %-8s %6s  %s\n' phase status seconds note
  while IFS=$'\t' read -r n s t note; do printf '%-22s %-8s %6s  %s\n' "$n" "$s" "$t" "$note"; done <"$work/phases.tsv"
  echo
  echo "=== tests (ctest.txt has the output of failures, junit.xml every case)"
  for part in kernels gpu; do
    [ -f "$logs/test-$part.log" ] || continue
    grep -E 'tests passed|tests failed out of|Total Test time' "$logs/test-$part.log" | sed "s/^/$part: /"
    sed -n '/The following tests FAILED/,$p' "$logs/test-$part.log" | grep -E '^\s+[0-9]+ - ' | sed "s/^/$part: FAILED/"
    grep -E '^\s*[0-9]+/[0-9]+ Test\s+#[0-9]+: .*\*\*\*Skipped|Not Run' "$logs/test-$part.log" | sed "s/^/$part: /"
  done
  echo
  echo "=== benchmarks (bench-kernels.txt, bench-training.txt, runs.txt)"
  [ -f "$logs/bench-kernels.log" ] && grep -E 'below 80%|TFLOP|bf16|f16|gemm|set-up' "$logs/bench-kernels.log" | head -n 25
  for b in bench-training-gpt bench-training-more; do
    [ -f "$logs/$b.log" ] && grep -E '^#|^===|^1 rank|MFU|phases|attention' "$logs/$b.log"
  done
  [ -f "$logs/profile-gpt.log" ] && grep -E '^1 rank' "$logs/profile-gpt.log" | sed 's/^/profile-gpt: /'
  [ -f "$logs/profile-gpt.log" ] && grep -E -A 32 '^# tenax op profile' "$logs/profile-gpt.log"
  [ -f "$logs/bench-checkpoint.log" ] && grep -E '^#|MiB|size/rank' "$logs/bench-checkpoint.log"
  [ -f "$logs/torch-reference.log" ] && grep -E 'TFLOP|GB/s' "$logs/torch-reference.log" | head -n 12
  [ -f "$logs/example-lm.log" ] && grep -E '^===|final|step 40 ' "$logs/example-lm.log"
  [ -f "$logs/sanitize.log" ] && grep -E 'ERROR SUMMARY|Invalid|PASSED|FAILED' "$logs/sanitize.log" | head -n 10
  echo
  echo "Files: summary.txt (this), system.txt (machine, tools, nvidia-smi -q, environment, dependency checks),"
  echo "ctest.txt + junit.xml (GPU tests), bench-kernels.txt, bench-training.txt, runs.txt (PyTorch reference,"
  echo "example program, compute-sanitizer), logs.tar.gz (every phase's full log, CMakeCache.txt, ctest's own logs)."
} >"$summary" 2>&1

{
  cat "$sysinfo"
  echo
  echo "=== nvidia-smi -q"
  nvidia-smi -q 2>&1 || echo "(nvidia-smi failed or is missing)"
  echo
  echo "=== unpack phase (fill libraries, environment, ldd checks, Open MPI smoke test)"
  cat "$logs/unpack.log" 2>/dev/null
  echo
  echo "=== configure: tenax summary and where each dependency came from"
  sed -n '/tenax .* configuration/,/^-- Configuring done/p; /--- dependencies as configured/,$p' "$logs/configure.log" 2>/dev/null
  echo
  echo "=== environment (values of names with TOKEN, SECRET, KEY, PASSWORD, CREDENTIAL or AUTH redacted)"
  env | sort | sed -E 's/^([^=]*(TOKEN|SECRET|KEY|PASSW|CREDENTIAL|AUTH)[^=]*)=.*/\1=<redacted>/I'
} >"$out/system.txt" 2>&1

cat "$logs/test-kernels.log" "$logs/test-gpu.log" >"$out/ctest.txt" 2>/dev/null
# One JUnit file: ctest writes one <testsuite> per run; wrap both in <testsuites>.
{
  echo '<?xml version="1.0" encoding="UTF-8"?>'
  echo '<testsuites>'
  for part in kernels gpu; do
    [ -f "$logs/junit-$part.xml" ] && grep -v '^<?xml' "$logs/junit-$part.xml" |
      sed "s/<testsuite name=\"[^\"]*\"/<testsuite name=\"test-$part\"/"
  done
  echo '</testsuites>'
} >"$out/junit.xml"
cp "$logs/bench-kernels.log" "$out/bench-kernels.txt" 2>/dev/null || echo "bench-kernels did not run" >"$out/bench-kernels.txt"
cat "$logs/bench-training-gpt.log" "$logs/profile-gpt.log" "$logs/bench-training-more.log" "$logs/bench-checkpoint.log" >"$out/bench-training.txt" 2>/dev/null ||
  [ -s "$out/bench-training.txt" ] || echo "bench-training did not run" >"$out/bench-training.txt"
{
  for r in torch-reference example-lm sanitize; do
    echo "=== $r"
    cat "$logs/$r.log" 2>/dev/null || echo "(did not run)"
    echo
  done
} >"$out/runs.txt"

# Everything else in one archive: the phase logs, the configuration, ctest's own logs.
stage=$work/pack
rm -rf "$stage"
mkdir -p "$stage/logs"
cp "$logs"/* "$stage/logs/" 2>/dev/null
cp "$work/phases.tsv" "$stage/" 2>/dev/null
cp "$build/CMakeCache.txt" "$stage/" 2>/dev/null
cp "$build"/Testing/Temporary/LastTest*.log "$stage/logs/" 2>/dev/null
cp "$build/.ninja_log" "$stage/ninja_log.txt" 2>/dev/null
for f in "$stage"/logs/*; do cap_file "$f" $((4 * 1024 * 1024)); done
tar -czf "$out/logs.tar.gz" -C "$stage" . 2>/dev/null
for f in "$out"/*; do
  [ "$f" = "$out/logs.tar.gz" ] || cap_file "$f" "$files_cap"
done
if [ "$(stat -c %s "$out/logs.tar.gz")" -gt "$files_cap" ]; then
  for f in "$stage"/logs/*; do cap_file "$f" $((512 * 1024)); done
  tar -czf "$out/logs.tar.gz" -C "$stage" .
fi

echo
cat "$summary"
((${#failed[@]} == 0))
