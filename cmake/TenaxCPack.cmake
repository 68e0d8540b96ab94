# Debian packages a site installs with its package manager: `cpack -G DEB` in the build directory (or
# `cmake --build build --target package`) writes, from the components the install() rules name:
#   libtenax            the runtime and kernels libraries                               (component runtime)
#   libtenax-dev        headers, the CMake package (find_package(tenax)) and tenax.pc   (component development)
#   tenax-tools         tenax-launch, tenax-report, tenax-data                          (component tools)
#   tenax-slurm-plugin  spank_tenax.so and a commented /etc/slurm/plugstack.conf.d/tenax.conf (component slurm_plugin)
# Library dependencies come from dpkg-shlibdeps; the packages' dependencies on each other from the components'.
# tests/install/check_packages.sh builds them and builds a program against the unpacked packages.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tenax)
set(CPACK_PACKAGE_VENDOR "tenax")
set(CPACK_PACKAGE_CONTACT "tenax maintainers <tenax@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libtenax's own libraries, which the other packages link, are found in the build tree while the packages are made.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/runtime ${PROJECT_BINARY_DIR}/kernels)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_COMPONENTS_ALL runtime development tools slurm_plugin)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libtenax)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME libtenax-dev)
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME tenax-tools)
# tenax-report draws with matplotlib; tenax-launch expands SLURM_JOB_NODELIST with libslurm (libslurm.so.38 is Debian 12's libslurm38, Slurm 22.05); the
# package name follows the soname of the libslurm found at configure time.
if(TENAX_HAVE_SLURM)
  get_filename_component(tenax_libslurm_real ${SLURM_LIBRARY} REALPATH)
  get_filename_component(tenax_libslurm_file ${tenax_libslurm_real} NAME)
  string(REGEX REPLACE "^libslurm\\.so\\.([0-9]+).*" "libslurm\\1" tenax_libslurm_package "${tenax_libslurm_file}")
  set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "python3, python3-matplotlib, ${tenax_libslurm_package}")
else()
  set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "python3, python3-matplotlib")
endif()
set(CPACK_DEBIAN_SLURM_PLUGIN_PACKAGE_NAME tenax-slurm-plugin)
set(CPACK_DEBIAN_SLURM_PLUGIN_PACKAGE_SECTION admin)
# The plugin must match the Slurm release that loads it (docs/admin-guide.md says how to rebuild it). hwloc's library
# comes from dpkg-shlibdeps; its plugins are named here: Debian ships hwloc's PCI discovery there, and without it the
# plugin finds no GPU.
set(CPACK_DEBIAN_SLURM_PLUGIN_PACKAGE_DEPENDS "slurm-client, libhwloc-plugins")
set(tenax_conffiles ${PROJECT_BINARY_DIR}/packaging/slurm_plugin/conffiles)
file(WRITE ${tenax_conffiles} "/etc/slurm/plugstack.conf.d/tenax.conf\n")
set(CPACK_DEBIAN_SLURM_PLUGIN_PACKAGE_CONTROL_EXTRA ${tenax_conffiles})

include(CPack)
cpack_add_component(runtime DISPLAY_NAME "libtenax" DESCRIPTION "tenax runtime and kernels libraries")
cpack_add_component(development DISPLAY_NAME "libtenax-dev" DEPENDS runtime
                    DESCRIPTION "tenax headers, CMake package and pkg-config file")
cpack_add_component(tools DISPLAY_NAME "tenax-tools" DEPENDS runtime
                    DESCRIPTION "tenax-launch, tenax-report and tenax-data")
cpack_add_component(slurm_plugin DISPLAY_NAME "tenax-slurm-plugin"
                    DESCRIPTION "Slurm SPANK plugin: --tenax-* options, placement, per-task environment")
