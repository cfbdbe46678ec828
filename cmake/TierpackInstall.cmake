# Install rules and the exported CMake package: find_package(tierpack) + tierpack::tierpack.
include(CMakePackageConfigHelpers)
install(FILES ${PROJECT_BINARY_DIR}/generated/core/version.hpp DESTINATION include/tierpack/core)
install(EXPORT tierpackTargets NAMESPACE tierpack:: DESTINATION lib/cmake/tierpack)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tierpackConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/tierpackConfig.cmake INSTALL_DESTINATION lib/cmake/tierpack)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tierpackConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tierpackConfig.cmake ${PROJECT_BINARY_DIR}/tierpackConfigVersion.cmake
        DESTINATION lib/cmake/tierpack)
