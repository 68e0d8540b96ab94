#!/usr/bin/env bash
# Checks the built plugin as Slurm will load it: exactly the SPANK symbols exported (the version script and
# -fvisibility=hidden), no library beyond libc and hwloc needed (no libtenax, MPI, HDF5, CUDA, libstdc++ or
# libpthread; hwloc is the topology library slurmstepd links itself), and the hardened link (full RELRO,
# non-executable stack).
set -euo pipefail
plugin=$1
fail() {
  echo "check_plugin_binary: $plugin: $*" >&2
  exit 1
}
[[ -r "$plugin" ]] || fail "not found"

expected="plugin_name plugin_type plugin_version slurm_spank_init slurm_spank_init_post_opt slurm_spank_job_epilog slurm_spank_task_init slurm_spank_user_init spank_plugin_version"
exported=$(nm -D --defined-only "$plugin" | awk '{print $3}' | sort | tr '\n' ' ' | sed 's/ $//')
[[ "$exported" == "$expected" ]] || fail "exports '$exported', expected exactly '$expected'"

needed=$(readelf -d "$plugin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ' | sed 's/ $//')
for lib in $needed; do
  [[ "$lib" == libc.so.6 || "$lib" == ld-linux*.so.* || "$lib" == libhwloc.so.15 ]] ||
    fail "needs $lib (only libc and hwloc are allowed)"
done

# libslurm's functions (the hostlist code) stay undefined, for the Slurm process to resolve: each must be one that
# libslurmfull, the library srun, sbatch, slurmd and slurmstepd link, exports (else loading the plugin fails).
undefined=$(nm -D --undefined-only "$plugin" | awk '$2 ~ /^slurm_hostlist_/ {print $2}' | sort)
[[ -n "$undefined" ]] || fail "uses no slurm_hostlist_* function from the Slurm process (libslurm linked in?)"
if command -v slurmstepd >/dev/null; then
  full=$(ldd "$(command -v slurmstepd)" | awk '$1 ~ /^libslurmfull/ {print $3}')
  [[ -n "$full" ]] || fail "slurmstepd here links no libslurmfull"
  provided=$(nm -D --defined-only "$full" | awk '{print $3}')
  for symbol in $undefined; do
    grep -qx "$symbol" <<<"$provided" || fail "needs $symbol, which $full does not export"
  done
fi

# Captured first: `grep -q` closing a pipe early would make pipefail report the writer's SIGPIPE.
dynamic=$(readelf -d "$plugin")
segments=$(readelf -lW "$plugin")
symbols=$(nm -D "$plugin")
grep -q 'BIND_NOW' <<<"$dynamic" || fail "not linked with -z now"
grep -q 'GNU_RELRO' <<<"$segments" || fail "not linked with -z relro"
if grep 'GNU_STACK' <<<"$segments" | grep -q 'RWE'; then fail "executable stack"; fi
grep -q '__stack_chk_fail' <<<"$symbols" || fail "not compiled with a stack protector"
# The release it was built for, readable by an admin (docs/admin-guide.md): CMake derives it from the header's
# SLURM_VERSION_NUMBER, the number plugin_version holds.
release=$(strings "$plugin" | sed -n 's/^tenax SPANK plugin built for Slurm //p')
[[ -n "$release" ]] || fail "no 'built for Slurm' string"
if [[ $# -ge 2 ]]; then
  [[ "$release" == "$2" ]] || fail "says it was built for Slurm $release, the header is $2"
fi
# And the Slurm installed here (the lab's) is the release it was built for, as an admin would check on a node.
if command -v slurmd >/dev/null; then
  installed=$(slurmd -V | awk '{print $2}')
  [[ "$release" == "$installed" ]] || fail "built for Slurm $release, but slurmd here is $installed"
fi
echo "check_plugin_binary: built for Slurm $release"
echo "check_plugin_binary: $plugin exports the 8 SPANK symbols, needs only: $needed; takes from the Slurm process:" \
  $undefined"; RELRO+BIND_NOW, stack protector"
