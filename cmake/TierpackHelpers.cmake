# Helpers that give every tierpack target the same shape: C++20, warnings for our code (errors with
# TIERPACK_WERROR, which scripts/test.sh turns on), optional sanitizers, include root at the repository
# top (headers are "component/name.hpp").

set(TIERPACK_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
# GCC 12 at -O3 warns -Wrestrict inside std::operator+(const char*, std::string&&) (GCC bug 105651, fixed in
# GCC 13): a false positive in libstdc++ itself, raised anywhere a string is built by concatenation.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  list(APPEND TIERPACK_WARNINGS -Wno-restrict)
endif()
if(TIERPACK_WERROR)
  list(APPEND TIERPACK_WARNINGS -Werror)
endif()
set(TIERPACK_SANITIZE_FLAGS "")
if(TIERPACK_SANITIZE)
  string(REPLACE ";" "," _san "${TIERPACK_SANITIZE}")
  set(TIERPACK_SANITIZE_FLAGS -fsanitize=${_san} -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
endif()
if(TIERPACK_BUILD_FUZZERS)  # libFuzzer coverage + ASan/UBSan in every tierpack target (tests/fuzz)
  set(TIERPACK_SANITIZE_FLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
endif()

# tierpack_target_defaults(<target> [CXX17_USERS | LIBTORCH_PROGRAM]): with CXX17_USERS the C++20
# requirement stays private, so programs that link the target build as C++17 (libtierpack_torch.so: LibTorch
# programs. Debian's torch 1.13 headers do not compile as C++20 under clang 14: c10::IValue is incomplete where
# std::vector needs it); LIBTORCH_PROGRAM: one of ours (an example, a test driver), C++17 as a user's is.
function(tierpack_target_defaults target)
  cmake_parse_arguments(ARG "CXX17_USERS;LIBTORCH_PROGRAM" "" "" ${ARGN})
  if(ARG_LIBTORCH_PROGRAM)
    target_compile_features(${target} PRIVATE cxx_std_17)
    set_target_properties(${target} PROPERTIES CXX_STANDARD 17)
  elseif(ARG_CXX17_USERS)
    target_compile_features(${target} PRIVATE cxx_std_20)
  else()
    target_compile_features(${target} PUBLIC cxx_std_20)
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${TIERPACK_WARNINGS}>)
  if(TIERPACK_SANITIZE_FLAGS)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX,C>:${TIERPACK_SANITIZE_FLAGS}>)
    target_link_options(${target} PUBLIC ${TIERPACK_SANITIZE_FLAGS})
  endif()
endfunction()

# tierpack_add_library(<name> SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...] [HEADER_DIR dir])
# Creates static library tierpack_<name>, alias tierpack::<name>, exported and installed with the
# headers of HEADER_DIR (default: the calling folder) under include/tierpack/<relative path>.
function(tierpack_add_library name)
  cmake_parse_arguments(ARG "" "HEADER_DIR" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  set(target tierpack_${name})
  add_library(${target} STATIC ${ARG_SOURCES})
  add_library(tierpack::${name} ALIAS ${target})
  tierpack_target_defaults(${target})
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                              $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated>
                                              $<INSTALL_INTERFACE:include/tierpack> $<INSTALL_INTERFACE:include>)
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  install(TARGETS ${target} EXPORT tierpackTargets ARCHIVE DESTINATION lib COMPONENT tierpack_dev
                                                   LIBRARY DESTINATION lib COMPONENT tierpack_dev)
  if(NOT ARG_HEADER_DIR)
    set(ARG_HEADER_DIR ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${ARG_HEADER_DIR})
  install(DIRECTORY ${ARG_HEADER_DIR}/ DESTINATION include/tierpack/${rel} COMPONENT tierpack_dev
          FILES_MATCHING PATTERN "*.hpp" PATTERN "detail" EXCLUDE)
endfunction()

# tierpack_add_test(<name> SOURCES ... DEPS ... [LABELS ...])
# One GoogleTest binary; each test case becomes a ctest test (discovered when ctest runs).
function(tierpack_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  tierpack_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main Threads::Threads)
  target_compile_definitions(${name} PRIVATE TIERPACK_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                             TIERPACK_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set(labels unit ${ARG_LABELS})
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST PROPERTIES LABELS "${labels}" TIMEOUT 600
                       TEST_LIST ${name}_TESTS)
  # gtest_discover_tests (CMake 3.25) flattens PROPERTIES, so a list of labels keeps only its first
  # ("unit"); set all of them on the discovered tests once they are known (runs after discovery).
  if(ARG_LABELS)
    set(script ${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake)
    file(WRITE ${script} "if(DEFINED ${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${labels}\")\nendif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})
  endif()
endfunction()

