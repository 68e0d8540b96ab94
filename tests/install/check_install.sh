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

# The installed API is one API whatever the build: no installed header asks which options the build had (the CUDA
# kernels are reached through tenax/ops.hpp, never declared under #if in an installed header), and every installed
# header compiles on its own against the installed tree alone (it includes nothing that was not installed).
headers=$(cd "$work/prefix/include" && find tenax -name '*.hpp' | sort)
if grep -n -E '^\s*#\s*(if|ifdef|ifndef|elif)\b.*TENAX_HAVE_' $(printf "$work/prefix/include/%s " $headers); then
  echo "check_install: the installed headers above depend on the build's options" >&2
  exit 1
fi
for h in $headers; do
  echo "#include \"$h\"" | c++ -std=c++20 -fsyntax-only -x c++ -I "$work/prefix/include" - 2>"$work/header.log" ||
    { cat "$work/header.log" >&2; echo "check_install: the installed $h does not compile on its own" >&2; exit 1; }
done
cmake -S "$consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log"
cmake --build "$work/build" >"$work/build.log"
# The installed library must be found through its install location, not the build tree, and without LD_LIBRARY_PATH
# naming it: the consumer's RUNPATH names the prefix's lib, and libtenax's own ($ORIGIN) serves libtenax_kernels, which
# the consumer's does not reach. (LD_LIBRARY_PATH keeps what the machine needs, MPI's or CUDA's.)
tenax_free_path=$(printf '%s' "${LD_LIBRARY_PATH:-}" | tr ':' '\n' | { grep -v -e "^$build" -e "^$work" || true; } |
  paste -sd: -)
LD_LIBRARY_PATH="$tenax_free_path" "$mpiexec" -n 2 "$work/build/consumer"
# Installed programs find the libraries in ../lib.
for program in tenax-example-gpt tenax-data; do
  test -x "$work/prefix/bin/$program" || { echo "check_install: $program was not installed" >&2; exit 1; }
  if LD_LIBRARY_PATH="$tenax_free_path" ldd "$work/prefix/bin/$program" | grep -E 'tenax.*not found'; then
    echo "check_install: the installed $program does not find tenax's libraries in the prefix" >&2
    exit 1
  fi
done
