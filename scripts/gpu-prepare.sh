#!/usr/bin/env bash
# Downloads the Debian 12 packages that scripts/gpu-run.sh needs on a GPU machine that reaches no package registry
# into .deps/ (git-ignored), checks that they close over their shared-library dependencies, writes .deps/MANIFEST,
# and prints the size of the tree plus .deps/ (kept under 64 MiB, so that the copy to the GPU machine stays small). Run
# it on a development machine where apt works,
# from anywhere inside the repository. Idempotent: a package whose current version is already in .deps/ is not
# downloaded again, and .deb files no longer on the list are removed.
#
#   scripts/gpu-prepare.sh            # then copy the tree with .deps/ and run there: bash scripts/gpu-run.sh OUT_DIR
#
# The package list and why each is there: scripts/gpu/debian-packages.txt. Exit 0 when .deps/ is complete; 1 with a
# message naming the package, SONAME or size that is wrong.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps=$root/.deps
list=$root/scripts/gpu/debian-packages.txt
limit=$((64 * 1024 * 1024))

die() {
  echo "gpu-prepare: $*" >&2
  exit 1
}

for tool in apt-get apt-cache dpkg-deb readelf git; do
  command -v "$tool" >/dev/null || die "$tool not found: run this on the Debian 12 development machine (apt-get install apt dpkg binutils git)"
done

# The GPU machine is x86-64. On another architecture here, ask apt for amd64 lists of its own (as the device notes do).
apt_opts=(-o APT::Sandbox::User=root -o DPkg::Lock::Timeout=300)
if [ "$(dpkg --print-architecture)" != amd64 ]; then
  mkdir -p /tmp/amd64-lists/partial
  apt_opts+=(-o APT::Architecture=amd64 -o APT::Architectures=amd64 -o Dir::State::Lists=/tmp/amd64-lists)
fi

mapfile -t entries < <(grep -Ev '^[[:space:]]*(#|$)' "$list")
((${#entries[@]} > 0)) || die "$list lists no package"

candidate() { # the version apt would download now, or nothing
  apt-cache "${apt_opts[@]}" policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}' | grep -v '(none)' || true
}

mkdir -p "$deps"
updated=0
declare -A want # package -> file name
manifest_lines=()
for entry in "${entries[@]}"; do
  read -r class pkg extra <<<"$entry"
  [[ "$class" == core || "$class" == fill ]] && [ -n "$pkg" ] && [ -z "${extra:-}" ] ||
    die "$list: bad line '$entry' (want: core|fill PACKAGE)"
  version=$(candidate "$pkg")
  if [ -z "$version" ] && [ "$updated" = 0 ]; then
    echo "gpu-prepare: no candidate for $pkg: apt-get update" >&2
    apt-get "${apt_opts[@]}" update -q >/dev/null
    updated=1
    version=$(candidate "$pkg")
  fi
  [ -n "$version" ] || die "apt knows no version of $pkg (is this Debian 12 with the main component enabled?)"
  # apt-get download writes the epoch's colon as %3a.
  file=$(compgen -G "$deps/${pkg}_${version//:/%3a}_*.deb" | head -n1 || true)
  if [ -z "$file" ]; then
    (cd "$deps" && apt-get "${apt_opts[@]}" download -q "$pkg=$version" >/dev/null) ||
      die "apt-get download $pkg=$version failed"
    file=$(compgen -G "$deps/${pkg}_${version//:/%3a}_*.deb" | head -n1 || true)
    [ -n "$file" ] || die "apt-get download $pkg=$version left no ${pkg}_*.deb in $deps"
    echo "gpu-prepare: downloaded $(basename "$file")"
  fi
  want[$pkg]=$(basename "$file")
  manifest_lines+=("$class $pkg $version $(basename "$file")")
done

# Anything else in .deps/ would travel for nothing (or be unpacked): stale versions and dropped packages go.
for f in "$deps"/*.deb; do
  [ -e "$f" ] || continue
  name=$(basename "$f")
  keep=0
  for pkg in "${!want[@]}"; do
    [ "${want[$pkg]}" = "$name" ] && keep=1 && break
  done
  if [ "$keep" = 0 ]; then
    echo "gpu-prepare: removing $name (not on the list)"
    rm -f "$f"
  fi
done

# The closure check: unpack everything into a scratch tree and ask, for every ELF file outside the optional plugins,
# whether each library it needs is provided by the tree itself or is one every image with a C++ compiler has.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for line in "${manifest_lines[@]}"; do
  read -r _ _ _ file <<<"$line"
  dpkg-deb -x "$deps/$file" "$scratch/tree"
done
base_sonames=" libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libresolv.so.2 ld-linux-x86-64.so.2 \
libstdc++.so.6 libgcc_s.so.1 libquadmath.so.0 libz.so.1 "
# Plugins of Open MPI whose libraries are left out on purpose (see the package list), and the parts tenax never loads.
optional='openmpi3/mca_(btl_openib|btl_ofi|btl_uct|mtl_ofi|mtl_psm|mtl_psm2|pml_ucx|osc_ucx|spml_ucx|atomic_ucx|sshmem_ucx|coll_ucc|scoll_ucc)\.so|libmca_common_(ucx|ofi|verbs)\.so|liboshmem|libmpi_java|fortran|usempi|mpifh|/bin/(osh|shmem)'
declare -A provided
needed_list=$scratch/needed
: >"$needed_list"
glibc_max=2.0
glibc_by=
while IFS= read -r -d '' f; do
  [ "$(head -c4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  provided[$(basename "$f")]=1
  dyn=$(readelf -d "$f" 2>/dev/null || true)
  soname=$(sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p' <<<"$dyn")
  [ -n "$soname" ] && provided[$soname]=1
  [[ "$f" =~ $optional ]] && continue
  sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' <<<"$dyn" | sed "s|\$| ${f#"$scratch/tree"}|" >>"$needed_list"
  v=$(readelf -V --wide "$f" 2>/dev/null | grep -o 'Name: GLIBC_[0-9.]*' | sed 's/Name: GLIBC_//' | sort -V | tail -n1 || true)
  if [ -n "$v" ] && [ "$(printf '%s\n%s\n' "$glibc_max" "$v" | sort -V | tail -n1)" = "$v" ] && [ "$v" != "$glibc_max" ]; then
    glibc_max=$v
    glibc_by=${f#"$scratch/tree"}
  fi
done < <(find "$scratch/tree" -type f -print0)
open=0
while read -r so user; do
  [[ "$base_sonames" == *" $so "* ]] && continue
  [ -n "${provided[$so]:-}" ] && continue
  echo "gpu-prepare: $user needs $so, which no listed package provides: add its package to $list" >&2
  open=1
done < <(sort -u "$needed_list")
[ "$open" = 0 ] || die "the package list does not close over its shared-library dependencies (see above)"

# cuDNN's fused attention: NVIDIA's cudnn-frontend headers (which scripts/install-deps.sh fetched, pinned) and this
# machine's cuDNN headers, for a GPU machine whose toolkit and Python wheels have no cudnn.h. Its library is the GPU
# machine's own.
frontend_include=/opt/cudnn-frontend-$(sed -n 's/.*set(TENAX_CUDNN_FRONTEND_VERSION \([0-9.]*\)).*/\1/p' \
  "$root/cmake/TenaxDependencies.cmake")/include
rm -rf "$deps/cudnn-frontend" "$deps/cudnn-include"
if [ -f "$frontend_include/cudnn_frontend.h" ] && compgen -G '/usr/local/cuda/include/cudnn*.h' >/dev/null; then
  mkdir -p "$deps/cudnn-frontend" "$deps/cudnn-include"
  cp -r "$frontend_include" "$deps/cudnn-frontend/"
  cp /usr/local/cuda/include/cudnn*.h "$deps/cudnn-include/"
else
  # An error, not a warning: the suite's fused-attention runs (TENAX_ATTENTION=fused) would fail on the GPU machine,
  # after its time has been spent on the build.
  die "no $frontend_include/cudnn_frontend.h or no /usr/local/cuda/include/cudnn.h: run scripts/install-deps.sh" \
    "(it fetches the pinned cudnn-frontend headers), then this script again"
fi

{
  echo "# Written by scripts/gpu-prepare.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(. /etc/os-release && echo "$PRETTY_NAME")."
  echo "# glibc_min: the newest GLIBC_ symbol version any carried ELF file needs (and the file that needs it)."
  echo "glibc_min $glibc_max $glibc_by"
  printf '%s\n' "${manifest_lines[@]}"
} >"$deps/MANIFEST"

# Sizes against 64 MiB: tracked files, untracked files git does not ignore (a copy of the tree takes them too),
# shared/ inside the checkout if there is one, and .deps/.
cd "$root"
sum_files() { xargs -0 -r du -cb -- 2>/dev/null | awk 'END {print $1 + 0}'; }
deb_bytes=$(find "$deps" -type f -print0 | sum_files)
tracked=$(git ls-files -z | sum_files)
untracked=$(git ls-files -z --others --exclude-standard | sum_files)
shared=0
[ -d shared ] && shared=$(find shared -type f -print0 | sum_files)
total=$((deb_bytes + tracked + untracked + shared))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "gpu-prepare: ${#manifest_lines[@]} packages in .deps/, $(mib "$deb_bytes"); needs glibc >= $glibc_max ($glibc_by)"
echo "gpu-prepare: tree to copy: tracked $(mib "$tracked") + untracked $(mib "$untracked") + shared/ $(mib "$shared") + .deps $(mib "$deb_bytes") = $(mib "$total") of 64 MiB"
if ((total > limit * 7 / 8)); then
  die "$(mib "$total") is too close to 64 MiB: remove untracked files or big build outputs from the tree (git status --ignored shows them)"
fi
