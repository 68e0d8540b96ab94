# Sourced by tenax's scripts: the Open MPI settings local runs need on any machine.
# - more ranks than cores is normal on a workstation or CI runner: oversubscribe, and bind nothing (ranks pinned to
#   the same core would crawl);
# - containers and CI often run as root, which mpirun refuses unless told;
# - large temporaries inside Open MPI are mmap'ed and unmapped per call unless malloc keeps them (fresh pages are slow
#   on virtual machines).
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_hwloc_base_binding_policy=none
export MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-1073741824}
export MALLOC_TRIM_THRESHOLD_=${MALLOC_TRIM_THRESHOLD_:-4294967296}
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
