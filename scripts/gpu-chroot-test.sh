#!/usr/bin/env bash
# Rehearses scripts/gpu-run.sh here, without a GPU, in a minimal Debian 12 chroot that has none of tenax's
# dependencies: only build-essential, CMake and ninja from their PyPI wheels (as on the GPU machine, whose CMake and
# ninja come with its Python), and this machine's CUDA toolkit mounted read-only at /usr/local/cuda. The repository
# is mounted read-only too, so the run proves that everything it needs comes from .deps/ and that it writes nothing
# into the tree. Without a GPU every GPU test fails with "no usable CUDA device" (TENAX_TEST_GPU=1), which is the
# expected result here; the point is that unpack, configure and build pass and that OUT_DIR is complete.
#
#   scripts/gpu-prepare.sh && scripts/gpu-chroot-test.sh [OUT_DIR]      # as root; default OUT_DIR /tmp/gpu-run-out
#
# Environment: GPU_CHROOT (default /var/tmp/tenax-gpu-chroot; made by debootstrap on first use, about a minute),
# GPU_CHROOT_CMAKE=debian to use Debian's cmake 3.25 and ninja-build instead of the wheels, and anything gpu-run.sh
# reads (GPU_RUN_BUDGET_S, GPU_RUN_SKIP, ...), passed through. Exit status: gpu-run.sh's.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$(realpath -m "${1:-/tmp/gpu-run-out}")
chroot_dir=${GPU_CHROOT:-/var/tmp/tenax-gpu-chroot}
cuda=$(readlink -f /usr/local/cuda)

die() {
  echo "gpu-chroot-test: $*" >&2
  exit 1
}
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, mount, chroot)"
[ -f "$root/.deps/MANIFEST" ] || die "no .deps/MANIFEST: run scripts/gpu-prepare.sh first"
[ -x "$cuda/bin/nvcc" ] || die "no CUDA toolkit at /usr/local/cuda"

if [ ! -x "$chroot_dir/usr/bin/g++" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -q -o DPkg::Lock::Timeout=300 debootstrap >/dev/null
  echo "gpu-chroot-test: debootstrap --variant=minbase --include=build-essential bookworm $chroot_dir"
  debootstrap --variant=minbase --include=build-essential bookworm "$chroot_dir" http://deb.debian.org/debian >/dev/null
fi

if [ "${GPU_CHROOT_CMAKE:-wheel}" = debian ]; then
  chroot "$chroot_dir" bash -c 'command -v cmake >/dev/null || { apt-get update -q && apt-get install -y -q cmake ninja-build; }' >/dev/null
  tools_path=
else
  if [ ! -x "$chroot_dir/opt/pytools/bin/cmake" ]; then
    wheels=$(mktemp -d)
    python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --python-version 3.12 --implementation cp cmake ninja -d "$wheels"
    mkdir -p "$chroot_dir/opt/pytools/bin"
    python3 - "$chroot_dir/opt/pytools" "$wheels"/*.whl <<'EOF'
import os, stat, sys, zipfile
dest = sys.argv[1]
for wheel in sys.argv[2:]:
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            path = z.extract(info, dest)
            if (info.external_attr >> 16) & stat.S_IXUSR or "/bin/" in info.filename or "/scripts/" in info.filename:
                os.chmod(path, 0o755)
EOF
    ln -sfn ../cmake/data/bin/cmake "$chroot_dir/opt/pytools/bin/cmake"
    ln -sfn ../cmake/data/bin/ctest "$chroot_dir/opt/pytools/bin/ctest"
    ninja_bin=$(cd "$chroot_dir/opt/pytools" && find . -path '*scripts/ninja' -o -path '*data/bin/ninja' | head -n1)
    ln -sfn "../${ninja_bin#./}" "$chroot_dir/opt/pytools/bin/ninja"
    rm -rf "$wheels"
  fi
  tools_path=/opt/pytools/bin:
fi

# None of tenax's own dependencies may be installed in the chroot, or the rehearsal proves nothing (libraries of the
# fill class may be: the machine's own copies are meant to win).
present=$(chroot "$chroot_dir" dpkg-query -W -f '${Package} ${Status}\n' 2>/dev/null |
  awk '$4 == "installed" {print $1}' |
  grep -E '^(openmpi-bin|libopenmpi|libhdf5|libopenblas|libblas|libcxxopts|libgtest|libgmock|googletest|libpmix|libhwloc|libevent|libsentencepiece|pkgconf|pkg-config)' || true)
[ -z "$present" ] || die "the chroot has $(echo "$present" | tr '\n' ' '): remove $chroot_dir and start again"

mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
bind() { # SRC DEST [ro]
  mkdir -p "$2"
  mount --bind "$1" "$2"
  mounts+=("$2")
  if [ "${3:-}" = ro ]; then mount -o remount,bind,ro "$2"; fi
}
bind /proc "$chroot_dir/proc"
bind /sys "$chroot_dir/sys"
bind /dev "$chroot_dir/dev"
bind /dev/pts "$chroot_dir/dev/pts"
mount -t tmpfs -o size=4g tmpfs "$chroot_dir/dev/shm"
mounts+=("$chroot_dir/dev/shm")
bind "$cuda" "$chroot_dir$cuda" ro
ln -sfn "$cuda" "$chroot_dir/usr/local/cuda"
bind "$root" "$chroot_dir/src" ro
mkdir -p "$out"
bind "$out" "$chroot_dir/out"

rc=0
chroot "$chroot_dir" env -i HOME=/root TERM=dumb "PATH=${tools_path}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  GPU_RUN_BUDGET_S="${GPU_RUN_BUDGET_S:-540}" GPU_RUN_SKIP="${GPU_RUN_SKIP:-}" GPU_RUN_JOBS="${GPU_RUN_JOBS:-}" \
  GPU_RUN_ARCH="${GPU_RUN_ARCH:-}" GPU_RUN_WORK="${GPU_RUN_WORK:-/tmp/tenax-gpu-run}" \
  GPU_RUN_SLOW="${GPU_RUN_SLOW:-1}" GPU_RUN_FILL="${GPU_RUN_FILL:-missing}" GPU_RUN_UNPACK="${GPU_RUN_UNPACK:-}" \
  CUDACXX="${CUDACXX:-}" \
  bash /src/scripts/gpu-run.sh /out || rc=$?
echo "gpu-chroot-test: gpu-run.sh exited $rc; its files are in $out:"
ls -la "$out"
exit $rc
