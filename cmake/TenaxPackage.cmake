# Installs a CMake package so that programs outside this tree build with
#   find_package(tenax REQUIRED)
#   target_link_libraries(app PRIVATE tenax::tenax)
include(CMakePackageConfigHelpers)

install(EXPORT tenaxTargets NAMESPACE tenax:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tenax)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tenaxConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tenaxConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tenax)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tenaxConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tenaxConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/tenaxConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tenax)
