# Installs a CMake package so that programs outside this tree build with
#   find_package(tenax REQUIRED)
#   target_link_libraries(app PRIVATE tenax::tenax)
include(CMakePackageConfigHelpers)

install(EXPORT tenaxTargets NAMESPACE tenax:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tenax COMPONENT development)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tenaxConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tenaxConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tenax)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tenaxConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tenaxConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/tenaxConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tenax COMPONENT development)

# A pkg-config file beside the CMake package, for programs built with make: its prefix is the install prefix, found
# at install time (so the same file is right for `cmake --install --prefix P` and for the Debian package).
install(CODE "
  set(TENAX_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(CMAKE_INSTALL_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(CMAKE_INSTALL_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(PROJECT_DESCRIPTION \"${PROJECT_DESCRIPTION}\")
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/cmake/tenax.pc.in\" \"${CMAKE_CURRENT_BINARY_DIR}/tenax.pc\" @ONLY)
  file(INSTALL \"${CMAKE_CURRENT_BINARY_DIR}/tenax.pc\" DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\")
" COMPONENT development)
