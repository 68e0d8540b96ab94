# Finds tenax's dependencies. Everything comes from Debian packages (scripts/install-deps.sh installs them).

find_package(Threads REQUIRED)

# Open MPI: the CPU communicator and the bootstrap of NCCL. Only the C bindings: the C++ bindings are deprecated and
# their symbols are not in libmpi.
set(MPI_CXX_SKIP_MPICXX ON)
find_package(MPI REQUIRED COMPONENTS C)

# Serial HDF5 (thread-safe build): checkpoints are file-per-rank, written by a rank's I/O threads (the shared
# directory's and the node-local tier's).
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(cxxopts REQUIRED)
# nlohmann-json (header-only): the lexer, parser and string escaping behind core/json. Private to tenax_core, whose
# installed headers do not include it.
find_package(nlohmann_json 3.11 REQUIRED)
find_package(BLAS REQUIRED)
# ISA-L (Debian libisal-dev): its CRC32C folds with carry-less multiplies and is 2.7-7.4x faster than the SSE4.2 loop
# on cache-resident buffers, 1.1-1.2x from memory (docs/benchmarks.md); the checksums of whole buffers use it when found. Optional: without it
# the in-house loop serves.
find_path(TENAX_ISAL_INCLUDE_DIR isa-l/crc.h)
find_library(TENAX_ISAL_LIBRARY isal)
if(TENAX_ISAL_INCLUDE_DIR AND TENAX_ISAL_LIBRARY)
  set(TENAX_HAVE_ISAL ON)
else()
  set(TENAX_HAVE_ISAL OFF)
endif()
find_path(TENAX_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-pthread)

# CUDA + NCCL, optional. check_language() asks whether nvcc can actually compile, which find_package(CUDAToolkit)
# does not (it finds the toolkit even when nvcc is unusable).
set(TENAX_HAVE_CUDA OFF)
set(TENAX_HAVE_NCCL OFF)
if(NOT TENAX_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # CMake 3.25 knows no CUDA20; the kernels are C++17. Never "native": it fails on machines without a GPU.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(TENAX_HAVE_CUDA ON)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME PATH_SUFFIXES include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME PATH_SUFFIXES lib lib64)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      set(TENAX_HAVE_NCCL ON)
      add_library(tenax_nccl INTERFACE)
      target_include_directories(tenax_nccl INTERFACE ${NCCL_INCLUDE_DIR})
      target_link_libraries(tenax_nccl INTERFACE ${NCCL_LIBRARY})
    endif()
    # cuDNN's fused attention (kernels/src/cuda/fused_attention.cpp), optional: cuDNN's headers and NVIDIA's
    # header-only cudnn-frontend, which Debian does not package (scripts/install-deps.sh unpacks the headers of its
    # PyPI wheel, pinned by version and hash, into /opt/cudnn-frontend-<version>). Nothing of cuDNN is linked: it is
    # opened at run time, and the library found here is only the fallback path for that.
    set(TENAX_CUDNN_FRONTEND_VERSION 1.32.0)
    find_path(TENAX_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_path(TENAX_CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
              PATHS /opt/cudnn-frontend-${TENAX_CUDNN_FRONTEND_VERSION}/include)
    find_library(TENAX_CUDNN_LIBRARY NAMES cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
    if(TENAX_CUDNN_INCLUDE_DIR AND TENAX_CUDNN_FRONTEND_INCLUDE_DIR)
      set(TENAX_HAVE_CUDNN_FRONTEND ON)
    else()
      set(TENAX_HAVE_CUDNN_FRONTEND OFF)
      message(STATUS "tenax: no cuDNN headers or cudnn-frontend headers: GPU attention uses the batched core only "
                     "(run scripts/install-deps.sh, or pass -DTENAX_CUDNN_FRONTEND_INCLUDE_DIR)")
    endif()
  elseif(TENAX_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TENAX_WITH_CUDA=ON but no working CUDA compiler was found: put nvcc on PATH or set "
                        "CMAKE_CUDA_COMPILER, or configure with -DTENAX_WITH_CUDA=OFF")
  endif()
endif()

# Slurm, optional: spank.h for the plugin, and libslurm, whose hostlist code expands and compresses node lists for
# the plugin, the placement library and tenax-launch (one parser with Slurm), and hwloc 2, with which the plugin reads
# the node it binds tasks on. The plugin leaves libslurm's symbols to the Slurm process that loads it; everything else
# links libslurm.so (tenax_libslurm below).
set(TENAX_HAVE_SLURM OFF)
if(NOT TENAX_WITH_SLURM STREQUAL "OFF")
  find_path(SLURM_SPANK_INCLUDE_DIR slurm/spank.h)
  find_library(SLURM_LIBRARY NAMES slurm)
  # The plugin reads the node's topology with hwloc 2 (the library slurmstepd links too).
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc>=2.0)
  endif()
  if(SLURM_SPANK_INCLUDE_DIR AND SLURM_LIBRARY AND HWLOC_FOUND)
    set(TENAX_HAVE_SLURM ON)
    # Link libslurm into every target that uses the hostlist code, except a target whose TENAX_SLURM_FROM_PROCESS
    # property is ON (the SPANK plugin): there slurm_hostlist_* stay undefined and resolve against the libslurm the
    # loading srun/sbatch/slurmd/slurmstepd already carries, so that the process never holds two copies of it.
    add_library(tenax_libslurm INTERFACE)
    target_include_directories(tenax_libslurm INTERFACE ${SLURM_SPANK_INCLUDE_DIR})
    target_link_libraries(tenax_libslurm INTERFACE
                          $<$<NOT:$<BOOL:$<TARGET_PROPERTY:TENAX_SLURM_FROM_PROCESS>>>:${SLURM_LIBRARY}>)
  elseif(TENAX_WITH_SLURM STREQUAL "ON")
    if(NOT SLURM_SPANK_INCLUDE_DIR OR NOT SLURM_LIBRARY)
      message(FATAL_ERROR "TENAX_WITH_SLURM=ON but slurm/spank.h or libslurm.so was not found: install libslurm-dev or "
                          "set SLURM_SPANK_INCLUDE_DIR and SLURM_LIBRARY")
    endif()
    message(FATAL_ERROR "TENAX_WITH_SLURM=ON but hwloc 2 was not found by pkg-config: install libhwloc-dev")
  elseif(SLURM_SPANK_INCLUDE_DIR AND SLURM_LIBRARY)
    message(STATUS "Slurm found but not hwloc 2 (libhwloc-dev): the SPANK plugin and placement are not built")
  endif()
endif()

if(TENAX_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
