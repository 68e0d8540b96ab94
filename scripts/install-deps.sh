#!/usr/bin/env bash
# Installs the Debian packages tenax builds and tests with. Idempotent: it asks dpkg first and only calls apt-get
# for what is missing, so a machine that has everything pays a fraction of a second.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  openmpi-bin libopenmpi-dev
  libhdf5-dev libhdf5-openmpi-dev hdf5-tools
  libcxxopts-dev libgtest-dev libgmock-dev
  nlohmann-json3-dev
  libopenblas-dev
  libslurm-dev slurmctld slurmd slurm-client munge libhwloc-dev libhwloc-plugins
  python3-h5py python3-matplotlib
  iproute2 procps
  python3-fusepy
  clang libclang-rt-14-dev
  libsentencepiece-dev python3.11-doc python3-numpy
  libisal-dev
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

# promtool (Prometheus's own checker of the textfile format the metrics write) comes from Debian's prometheus
# package, whose server the tests do not want: its binary alone is unpacked into /usr/local/bin.
install_promtool() {
  command -v promtool >/dev/null 2>&1 && return 0
  local work
  work=$(mktemp -d)
  (cd "$work" && apt-get download -q -o DPkg::Lock::Timeout=300 prometheus >/dev/null 2>&1) ||
    { $sudo apt-get update -q -o DPkg::Lock::Timeout=300 && (cd "$work" && apt-get download -q prometheus); }
  dpkg-deb --fsys-tarfile "$work"/prometheus_*.deb | tar -x -C "$work" ./usr/bin/promtool
  $sudo install -m 0755 "$work/usr/bin/promtool" /usr/local/bin/promtool
  rm -rf "$work"
}

# NVIDIA's cudnn-frontend (header-only; cuDNN's fused attention on GPUs), which Debian does not package: the include/
# folder of its PyPI wheel, pinned by version and hash (cmake/TenaxDependencies.cmake names the same version). Only
# where the CUDA toolkit has cuDNN's headers. A failure is not fatal: the build then has no fused attention and its
# configure summary says so; GPU runs use the batched attention core.
cudnn_frontend_version=1.32.0
cudnn_frontend_sha256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
install_cudnn_frontend() {
  local dest=/opt/cudnn-frontend-$cudnn_frontend_version
  [[ -f $dest/include/cudnn_frontend.h ]] && return 0
  [[ -f /usr/local/cuda/include/cudnn.h ]] || return 0
  local work
  work=$(mktemp -d)
  printf 'nvidia-cudnn-frontend==%s --hash=sha256:%s\n' "$cudnn_frontend_version" "$cudnn_frontend_sha256" \
    >"$work/requirements.txt"
  if python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 --require-hashes -r "$work/requirements.txt" -d "$work" &&
    python3 -m zipfile -e "$work"/nvidia_cudnn_frontend-*.whl "$work/wheel" &&
    [[ -f $work/wheel/include/cudnn_frontend.h ]]; then
    $sudo mkdir -p "$dest"
    $sudo cp -r "$work/wheel/include" "$dest/"
  else
    echo "tenax: could not fetch cudnn-frontend $cudnn_frontend_version from PyPI; building without fused attention" >&2
  fi
  rm -rf "$work"
}

if [[ $(id -u) -ne 0 ]]; then
  sudo=sudo
else
  sudo=
fi

if ((${#missing[@]} == 0)); then
  install_promtool
  install_cudnn_frontend
  exit 0
fi

echo "tenax: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Another process may hold the dpkg lock on a fresh machine; wait for it rather than fail.
apt_opts=(-y -q --no-install-recommends -o DPkg::Lock::Timeout=300)
if ! $sudo apt-get install "${apt_opts[@]}" "${missing[@]}"; then
  # A fresh machine has no package lists yet: refresh once and retry.
  $sudo apt-get update -q -o DPkg::Lock::Timeout=300
  $sudo apt-get install "${apt_opts[@]}" "${missing[@]}"
fi
install_promtool
install_cudnn_frontend
