# hwloc, jemalloc and libnuma: the system libraries behind tierpack's tiers (topology discovery, host
# arenas, NUMA placement). Each becomes the imported target PkgConfig::<NAME> (HWLOC, JEMALLOC, NUMA),
# through pkg-config when it finds the library, else through find_path/find_library, so a prefix without
# pkg-config (a machine that lacks the -dev packages, with Debian's .deb files extracted into a prefix on
# CMAKE_PREFIX_PATH: scripts/gpu-machine-build.sh) works as well. A library that is found nowhere stops
# the configuration with the package to install: a tier is never dropped silently.
# Used by the build (TierpackDependencies.cmake) and by the installed package (tierpackConfig.cmake).

# tierpack_find_system_library(<NAME> MODULE <pkg-config module> HEADER <header> LIBRARY <name>
#                              PACKAGE <Debian/Ubuntu package> WHY <what needs it> [HINT <how to do without>])
function(tierpack_find_system_library name)
  cmake_parse_arguments(ARG "" "MODULE;HEADER;LIBRARY;PACKAGE;WHY;HINT" "" ${ARGN})
  if(TARGET PkgConfig::${name})
    return()
  endif()
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(${name} QUIET IMPORTED_TARGET GLOBAL ${ARG_MODULE})
    if(TARGET PkgConfig::${name})
      return()
    endif()
  endif()
  find_path(TIERPACK_${name}_INCLUDE_DIR ${ARG_HEADER})
  find_library(TIERPACK_${name}_LIBRARY ${ARG_LIBRARY})
  if(NOT TIERPACK_${name}_INCLUDE_DIR OR NOT TIERPACK_${name}_LIBRARY)
    set(how "install the Debian/Ubuntu package ${ARG_PACKAGE} (apt-get install ${ARG_PACKAGE}), or put the prefix that has ${ARG_HEADER} and lib${ARG_LIBRARY}.so on CMAKE_PREFIX_PATH")
    if(ARG_HINT)
      string(APPEND how "; ${ARG_HINT}")
    endif()
    message(FATAL_ERROR "tierpack: ${ARG_MODULE} not found (${ARG_WHY}): ${how}")
  endif()
  add_library(PkgConfig::${name} INTERFACE IMPORTED GLOBAL)
  set_target_properties(PkgConfig::${name} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${TIERPACK_${name}_INCLUDE_DIR}"
                                                      INTERFACE_LINK_LIBRARIES "${TIERPACK_${name}_LIBRARY}")
  message(STATUS "tierpack: ${ARG_MODULE}: ${TIERPACK_${name}_LIBRARY} (no pkg-config file found)")
endfunction()

tierpack_find_system_library(HWLOC MODULE hwloc>=2.1 HEADER hwloc.h LIBRARY hwloc PACKAGE libhwloc-dev
                             WHY "the memory tiers of the machine")
tierpack_find_system_library(JEMALLOC MODULE jemalloc HEADER jemalloc/jemalloc.h LIBRARY jemalloc
                             PACKAGE libjemalloc-dev WHY "the host tiers' arenas")
if(TIERPACK_WITH_NUMA)
  tierpack_find_system_library(NUMA MODULE numa HEADER numa.h LIBRARY numa PACKAGE libnuma-dev
                               WHY "placing host memory on NUMA nodes"
                               HINT "-DTIERPACK_WITH_NUMA=OFF builds a one-node host tier instead")
endif()
