#!/usr/bin/env bash
# check_install.sh BUILD_DIR CONSUMER_SOURCE WORK_DIR MPIEXEC
set -euo pipefail
build=$1 consumer=$2 work=$3 mpiexec=$4
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
test -f "$work/prefix/lib/cmake/tenax/tenaxConfig.cmake"
test -f "$work/prefix/include/tenax/communicator.hpp"
test -f "$work/prefix/include/tenax/build_config.hpp"
cmake -S "$consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log"
cmake --build "$work/build" >"$work/build.log"
# The installed library must be found through its install location, not the build tree.
LD_LIBRARY_PATH="$work/prefix/lib" "$mpiexec" -n 2 "$work/build/consumer"
