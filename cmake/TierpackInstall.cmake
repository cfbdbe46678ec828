# Install rules and the exported CMake package: find_package(tierpack) + tierpack::tierpack.
# Components: tierpack_runtime (bin/tierpack and the shared libraries in lib/: what a run needs),
# tierpack_python (the Python package and bootstrap in lib/tierpack/python), tierpack_dev (headers, static
# libraries, the CMake package). `cmake --install` installs all three; the pip build (setup.py) the first two.
include(CMakePackageConfigHelpers)
install(FILES ${PROJECT_BINARY_DIR}/generated/core/version.hpp DESTINATION include/tierpack/core COMPONENT tierpack_dev)
# The C ABI of the shared libraries, where a C program looks for it: #include <tierpack.h>.
install(FILES ${PROJECT_SOURCE_DIR}/include/tierpack.h DESTINATION include COMPONENT tierpack_dev)
install(EXPORT tierpackTargets NAMESPACE tierpack:: DESTINATION lib/cmake/tierpack COMPONENT tierpack_dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tierpackConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/tierpackConfig.cmake INSTALL_DESTINATION lib/cmake/tierpack)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tierpackConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tierpackConfig.cmake ${PROJECT_BINARY_DIR}/tierpackConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/TierpackSystemLibraries.cmake
        DESTINATION lib/cmake/tierpack COMPONENT tierpack_dev)
