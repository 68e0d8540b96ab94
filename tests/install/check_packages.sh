#!/usr/bin/env bash
# check_packages.sh BUILD_DIR CONSUMER_SOURCE WORK_DIR MPIEXEC
# Builds the Debian packages (cmake/TenaxCPack.cmake), unpacks them into a scratch root, checks what each holds and
# what it depends on, then builds the consumer program against the unpacked root twice — with find_package(tenax)
# and with pkg-config — and runs both on 2 ranks: what a site that installs the packages gets.
set -euo pipefail
build=$1 consumer=$2 work=$3 mpiexec=$4
rm -rf "$work"
mkdir -p "$work/packages" "$work/root"
fail() {
  echo "check_packages: $*" >&2
  exit 1
}

(cd "$build" && cpack -G DEB -B "$work/packages" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack failed"; }
version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")
[ -n "$version" ] || fail "no CPACK_PACKAGE_VERSION in $build/CPackConfig.cmake"
for package in libtenax libtenax-dev tenax-tools tenax-slurm-plugin; do
  deb=$(ls "$work/packages/${package}_${version}_"*.deb 2>/dev/null | head -n 1)
  [ -n "$deb" ] || fail "package $package was not built (see $work/cpack.log)"
  dpkg-deb -x "$deb" "$work/root"
  depends=$(dpkg-deb -f "$deb" Depends)
  echo "check_packages: $package: Depends: $depends"
  case $package in
    libtenax-dev)
      [[ $depends == *"libtenax (= $version)"* ]] || fail "$package does not depend on libtenax (= $version)" ;;
    tenax-tools)
      [[ $depends == *"libtenax (= $version)"* ]] || fail "$package does not depend on libtenax (= $version)"
      # tenax-launch expands SLURM_JOB_NODELIST with libslurm: the package of the libslurm.so.N it links.
      slurm_package=$(dpkg -S "$(readlink -f "$(ldconfig -p | awk '/libslurm\.so\.[0-9]+ / {print $NF; exit}')")" |
        cut -d: -f1)
      [[ $depends == *"$slurm_package"* ]] || fail "$package does not depend on $slurm_package (libslurm)" ;;
    libtenax)
      [[ $depends == *libopenmpi* && $depends == *libhdf5* ]] || fail "libtenax's dependencies miss Open MPI or HDF5" ;;
    tenax-slurm-plugin)
      # hwloc's library (from dpkg-shlibdeps) and its plugins, without which discovery finds no PCI device (no GPU).
      [[ $depends == *libhwloc15* && $depends == *libhwloc-plugins* ]] ||
        fail "tenax-slurm-plugin's dependencies miss libhwloc15 or libhwloc-plugins" ;;
  esac
done
root=$work/root
for f in usr/lib/libtenax.so.0 usr/lib/libtenax_kernels.so.0 usr/include/tenax/engine.hpp usr/include/tenax/build_config.hpp \
  usr/lib/cmake/tenax/tenaxConfig.cmake usr/lib/pkgconfig/tenax.pc usr/bin/tenax-launch usr/bin/tenax-report \
  usr/bin/tenax-data usr/lib/slurm/spank_tenax.so etc/slurm/plugstack.conf.d/tenax.conf; do
  [ -e "$root/$f" ] || fail "/$f is in no package"
done
# Placement is the plugin's: libtenax-dev does not install its headers.
[ ! -e "$root/usr/include/tenax/placement.hpp" ] || fail "libtenax-dev installs placement.hpp"
# The plugstack.conf.d entry names the plugin where its package puts it, and dpkg keeps the file as a conffile.
plugin=$(sed -n 's/^# required \([^ ]*\) .*/\1/p' "$root/etc/slurm/plugstack.conf.d/tenax.conf")
[ "$plugin" = /usr/lib/slurm/spank_tenax.so ] || fail "tenax.conf names '$plugin', not the packaged plugin"
dpkg-deb --ctrl-tarfile "$work/packages/tenax-slurm-plugin_${version}_"*.deb | tar -xO ./conffiles |
  grep -qx /etc/slurm/plugstack.conf.d/tenax.conf || fail "tenax.conf is not a conffile"

export LD_LIBRARY_PATH=$root/usr/lib
"$root/usr/bin/tenax-launch" --help >"$work/launch-help.txt" || fail "the packaged tenax-launch --help failed"
cmake -S "$consumer" -B "$work/cmake-build" -G Ninja -DCMAKE_PREFIX_PATH="$root/usr" >"$work/configure.log"
cmake --build "$work/cmake-build" >"$work/build.log"
"$mpiexec" -n 2 "$work/cmake-build/consumer"
flags=$(PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_LIBDIR=$root/usr/lib/pkgconfig pkg-config --cflags --libs tenax)
echo "check_packages: pkg-config --cflags --libs tenax: $flags"
# shellcheck disable=SC2086  # the flags are words
c++ -std=c++20 "$consumer/main.cpp" $flags -o "$work/consumer-pkg-config"
"$mpiexec" -n 2 "$work/consumer-pkg-config" | sed 's/^consumer:/consumer (pkg-config):/'
