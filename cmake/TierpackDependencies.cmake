# Third-party dependencies, all from Debian packages (scripts/install-deps.sh installs them).
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 QUIET)
if(NOT nlohmann_json_FOUND)
  message(FATAL_ERROR "tierpack: nlohmann_json >= 3.10 not found: install the Debian/Ubuntu package nlohmann-json3-dev "
                      "(apt-get install nlohmann-json3-dev), or put its prefix on CMAKE_PREFIX_PATH")
endif()
# CLI11 parses the `tierpack` command line (integrations/cli/args.cpp); header-only, Debian's is 2.1.2.
find_package(CLI11 2.1 CONFIG QUIET)
if(NOT CLI11_FOUND)
  message(FATAL_ERROR "tierpack: CLI11 >= 2.1 not found (the tierpack command's parser): install the Debian/Ubuntu "
                      "package libcli11-dev (apt-get install libcli11-dev), or put its prefix on CMAKE_PREFIX_PATH")
endif()
include(TierpackSystemLibraries)  # hwloc, jemalloc, libnuma
if(TIERPACK_WITH_CUDA)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
if(TIERPACK_BUILD_TESTS)
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    message(FATAL_ERROR "tierpack: GoogleTest not found (the test suites): install the Debian/Ubuntu packages "
                        "libgtest-dev libgmock-dev, or configure with -DTIERPACK_BUILD_TESTS=OFF")
  endif()
endif()
if(TIERPACK_BUILD_BENCH)
  find_package(benchmark QUIET)
  if(NOT benchmark_FOUND)
    message(FATAL_ERROR "tierpack: Google Benchmark not found (the benchmark programs): install the Debian/Ubuntu "
                        "package libbenchmark-dev, or configure with -DTIERPACK_BUILD_BENCH=OFF")
  endif()
endif()
if(TIERPACK_WITH_TORCH)
  # Torch is the one of the Python named by TIERPACK_PYTHON (default: $ENV{TIERPACK_PYTHON}), else of the
  # first python3 on PATH that imports torch, else of /usr/bin/python3. A pip wheel ships its CMake config in
  # torch.utils.cmake_prefix_path; Debian's libtorch-dev installs it under the multiarch dir, found without.
  set(TIERPACK_PYTHON "$ENV{TIERPACK_PYTHON}" CACHE FILEPATH
      "Python whose torch to build against (default: the first python3 on PATH that imports torch, else /usr/bin/python3)")
  set(_py "${TIERPACK_PYTHON}")
  if(NOT _py)
    set(_py /usr/bin/python3)
    string(REPLACE ":" ";" _path_dirs "$ENV{PATH}")
    foreach(_dir IN LISTS _path_dirs)
      if(EXISTS "${_dir}/python3" AND NOT IS_DIRECTORY "${_dir}/python3")
        execute_process(COMMAND "${_dir}/python3" -c "import importlib.util, sys; sys.exit(not importlib.util.find_spec('torch'))"
                        RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
        if(_rc EQUAL 0)
          set(_py "${_dir}/python3")
          break()
        endif()
      endif()
    endforeach()
  endif()
  execute_process(COMMAND "${_py}" -c "import torch, torch.utils; print(torch.utils.cmake_prefix_path); print(torch.__version__); print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
                  OUTPUT_VARIABLE _torch_py OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  set(_torch_hints "")
  set(_torch_py_version "")
  set(_torch_py_abi "")
  if(_rc EQUAL 0)
    string(REPLACE "\n" ";" _torch_py "${_torch_py}")
    list(GET _torch_py 0 _torch_hints)
    list(GET _torch_py 1 _torch_py_version)
    list(GET _torch_py 2 _torch_py_abi)
  elseif(TIERPACK_PYTHON)
    message(FATAL_ERROR "TIERPACK_PYTHON=${TIERPACK_PYTHON} cannot import torch")
  endif()
  find_package(Torch REQUIRED HINTS ${_torch_hints})
  # A Torch_DIR left in the cache by another Python's torch is not this one: say so.
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" _py_mm "${_torch_py_version}")
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" _cmake_mm "${Torch_VERSION}")
  if(_py_mm AND NOT _py_mm STREQUAL _cmake_mm)
    message(WARNING "Torch ${Torch_VERSION} found at ${Torch_DIR}, but ${_py} has torch ${_torch_py_version}: "
                    "use a fresh build directory or set Torch_DIR")
  endif()

  # Note [Torch build defines]: every TU that includes torch headers is compiled with the defines torch was
  # built with, or the layouts of torch's structs differ between it and us (a Debug build read torch's
  # RecordFunction wrongly: UBSan "load of value 44 ... for type 'bool'"). Debian's libtorch and the pip
  # wheels are built with NDEBUG; the C++11 ABI flag comes from TorchConfig (TORCH_CXX_FLAGS), else from the
  # Python's torch. Every target that includes torch headers links the imported torch or c10 target, so those
  # carry them.
  set(TIERPACK_TORCH_CXX11_ABI "${_torch_py_abi}")
  if(TORCH_CXX_FLAGS MATCHES "-D_GLIBCXX_USE_CXX11_ABI=([01])")
    set(TIERPACK_TORCH_CXX11_ABI ${CMAKE_MATCH_1})
  endif()
  set(_torch_defs NDEBUG)
  if(NOT TIERPACK_TORCH_CXX11_ABI STREQUAL "")
    list(APPEND _torch_defs _GLIBCXX_USE_CXX11_ABI=${TIERPACK_TORCH_CXX11_ABI})
  endif()
  foreach(_t torch c10)
    if(TARGET ${_t})
      set_property(TARGET ${_t} APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS ${_torch_defs})
    endif()
  endforeach()
  if(TIERPACK_TORCH_CXX11_ABI STREQUAL "0")
    # Our static libraries go into libtierpack_torch.so and pass std::string to its torch code: all of
    # tierpack then uses torch's old ABI (C++ libraries built with the new one, e.g. GoogleTest, do not link).
    add_compile_definitions(_GLIBCXX_USE_CXX11_ABI=0)
  endif()
  message(STATUS "Torch ${Torch_VERSION} (${Torch_DIR}; Python ${_py}; _GLIBCXX_USE_CXX11_ABI=${TIERPACK_TORCH_CXX11_ABI})")
endif()
