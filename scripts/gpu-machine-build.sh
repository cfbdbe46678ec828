#!/usr/bin/env bash
# Builds the whole of tierpack (CLI, host side libtierpack_torch.so, GPU tier libtierpack_cuda.so, the
# torch.OutOfMemoryError shim libtierpack_cuda_torch.so) on a machine that has a Python with torch (e.g. a
# virtualenv with torch 2.11 + CUDA 13), cmake, ninja and nvcc, but neither the -dev packages tierpack needs
# (jemalloc, hwloc, libnuma, nlohmann_json) nor network. Those are carried: on a Debian 12 machine that has
# them (scripts/install-deps.sh), `pack` puts the files of their Debian packages into one archive; on the
# GPU machine, `build` unpacks it into a prefix next to the build and builds against it.
#
#   scripts/gpu-machine-build.sh pack DEPS.tar.gz            # here: the Debian packages' files, ~3 MB
#   scripts/gpu-machine-build.sh build --deps DEPS.tar.gz|DIR [--python PY] [--build-dir DIR] [--prefix DIR]
#                                      [--no-pip] [--configure-only]
#
# `build` configures a Release build against PY's torch (default: the python3 on PATH) with the GPU tier
# required (no nvcc is an error, not a build without it), without the test suites and benchmarks (they need
# GoogleTest and Google Benchmark), builds everything, installs it into --prefix (default
# <build-dir>/install, with bin/tierpack), and, when PY has setuptools, pip-installs it into PY's
# environment from that build (TIERPACK_BUILD_DIR), so `tierpack` and `import tierpack` work there. The
# installed binaries find the carried libraries through their RUNPATH: keep the deps directory
# (<build-dir>/deps when an archive was given).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

# The Debian packages carried: headers + linker names (-dev) and the shared libraries (runtime packages).
deb_pkgs=(libjemalloc-dev libjemalloc2 libhwloc-dev libhwloc15 libnuma-dev libnuma1 nlohmann-json3-dev libcli11-dev)

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

pack() {
  local out=$1 stage p f
  [ -n "$out" ] || usage
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  for p in "${deb_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      { echo "gpu-machine-build: package $p is not installed here (scripts/install-deps.sh installs it)" >&2; exit 1; }
    # Every file and symlink of the package, except documentation and pkg-config files (those name /usr,
    # not the prefix they will be unpacked to: CMake finds the libraries by path instead).
    dpkg -L "$p" | while read -r f; do
      case "$f" in /usr/share/doc/*|/usr/share/man/*|*.pc) continue ;; esac
      if [ -L "$f" ] || [ -f "$f" ]; then mkdir -p "$stage$(dirname "$f")" && cp -P --preserve=mode,timestamps "$f" "$stage$f"; fi
    done
  done
  dpkg-query -W -f='${Package} ${Version}\n' "${deb_pkgs[@]}" >"$stage/PACKAGES"
  tar -C "$stage" -czf "$out" .
  echo "gpu-machine-build: wrote $out ($(du -h "$out" | cut -f1)): $(tr '\n' ' ' <"$stage/PACKAGES")"
}

build() {
  local deps="" python="" build_dir="$repo/build-gpu" prefix="" pip=1 configure_only=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --deps) deps=$2; shift 2 ;;
      --python) python=$2; shift 2 ;;
      --build-dir) build_dir=$2; shift 2 ;;
      --prefix) prefix=$2; shift 2 ;;
      --no-pip) pip=0; shift ;;
      --configure-only) configure_only=1; shift ;;
      *) usage ;;
    esac
  done
  [ -n "$deps" ] || usage
  python=${python:-$(command -v python3)}
  mkdir -p "$build_dir"
  build_dir=$(cd "$build_dir" && pwd)
  prefix=${prefix:-$build_dir/install}
  if [ -f "$deps" ]; then
    rm -rf "$build_dir/deps" && mkdir -p "$build_dir/deps"
    tar -C "$build_dir/deps" -xzf "$deps"
    deps=$build_dir/deps
  fi
  deps=$(cd "$deps" && pwd)
  [ -f "$deps/usr/include/jemalloc/jemalloc.h" ] || { echo "gpu-machine-build: $deps has no usr/include/jemalloc/jemalloc.h" >&2; exit 1; }
  "$python" -c 'import torch' || { echo "gpu-machine-build: $python cannot import torch" >&2; exit 1; }
  # The carried shared libraries' directory goes into the installed RUNPATHs: CMake leaves out link
  # directories inside the build tree (where an unpacked archive lies), so it is named here.
  local deps_lib
  deps_lib=$(dirname "$(find "$deps/usr/lib" -name libjemalloc.so.2 | head -n 1)")
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  [ -f "$build_dir/CMakeCache.txt" ] && gen=()
  echo "== configure ($build_dir; torch of $python; libraries from $deps)"
  cmake -S "$repo" -B "$build_dir" "${gen[@]}" --no-warn-unused-cli -DCMAKE_BUILD_TYPE=Release -DTIERPACK_PYTHON="$python" \
        -DCMAKE_PREFIX_PATH="$deps/usr" -DPKG_CONFIG_USE_CMAKE_PREFIX_PATH=OFF -DCMAKE_INSTALL_RPATH="$deps_lib" \
        -DTIERPACK_WITH_CUDA=ON -DTIERPACK_WITH_TORCH=ON -DTIERPACK_WITH_NUMA=ON \
        -DTIERPACK_BUILD_TESTS=OFF -DTIERPACK_BUILD_BENCH=OFF ${CMAKE_ARGS:-}
  [ "$configure_only" = 0 ] || return 0
  echo "== build"
  cmake --build "$build_dir" -j "$(nproc)"
  echo "== install ($prefix)"
  cmake --install "$build_dir" --prefix "$prefix" >/dev/null
  "$prefix/bin/tierpack" --version
  local lib
  for lib in libtierpack_torch.so libtierpack_cuda.so libtierpack_cuda_torch.so libtierpack_preload.so; do
    [ -f "$prefix/lib/$lib" ] || { echo "gpu-machine-build: $lib was not built" >&2; exit 1; }
  done
  if [ "$pip" = 1 ]; then
    # setuptools builds the wheel with its own bdist_wheel from 70.1 on, older ones need the wheel package.
    if "$python" -c 'import importlib.util as u, setuptools, sys
v = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
sys.exit(0 if v >= (70, 1) or u.find_spec("wheel") else 1)' 2>/dev/null; then
      echo "== pip install into $("$python" -c 'import sys; print(sys.prefix)') (from $build_dir)"
      TIERPACK_BUILD_DIR="$build_dir" "$python" -m pip install --no-build-isolation --no-deps --no-index "$repo"
    else
      echo "== no pip install: $python has no setuptools (or one older than 70.1 without wheel): use $prefix/bin/tierpack"
    fi
  fi
  echo "== done: $prefix/bin/tierpack run --gpu-budget 60% -o run.tpk --stats s.json -- $python train.py"
}

case "${1:-}" in
  pack) shift; pack "${1:-}" ;;
  build) shift; build "$@" ;;
  *) usage ;;
esac
