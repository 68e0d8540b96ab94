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

if [[ $(id -u) -ne 0 ]]; then
  sudo=sudo
else
  sudo=
fi

if ((${#missing[@]} == 0)); then
  install_promtool
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
