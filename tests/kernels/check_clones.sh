#!/bin/sh
# check_clones.sh LIBRARY KERNEL...: each KERNEL has its AVX-512 (x86-64-v4) and AVX2 (x86-64-v3) clone in LIBRARY,
# as GCC names them in the symbol table ("... [clone .arch_x86_64_v4]").
set -eu
library=$1
shift
symbols=$(nm -C "$library")
for kernel in "$@"; do
  for level in arch_x86_64_v4 arch_x86_64_v3; do
    if ! printf '%s\n' "$symbols" | grep -q "$kernel.*$level"; then
      echo "no $level clone of $kernel in $library" >&2
      exit 1
    fi
  done
done
echo "every clone present in $library: $*"
