"""`pip install --no-build-isolation .`: builds tierpack with CMake and puts the `tierpack` command, its shared
libraries and the Python package into the environment (PEP 517 through setuptools; no network).

The wheel's package directory holds what CMake's install rules install (cmake/TierpackInstall.cmake):
    tierpack/*.py, tierpack/_version.py      component tierpack_python (the package, the project's VERSION)
    tierpack/_bootstrap/sitecustomize.py     component tierpack_python (python/sitecustomize)
    tierpack/bin/tierpack                    component tierpack_runtime (the CLI; `tierpack` runs it)
    tierpack/lib/libtierpack_*.so            component tierpack_runtime (found relative to the package)

Environment:
    TIERPACK_BUILD_TYPE   CMake build type (default Release)
    CMAKE_ARGS            more CMake arguments for the configuration, e.g. "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
    TIERPACK_BUILD_DIR    an existing, configured build directory of this source tree to build the runtime targets
                          in and install from, instead of build-pip/cmake (configured here with this interpreter
                          as TIERPACK_PYTHON); its torch must be this interpreter's (scripts/test.sh uses build/)
    CMAKE_BUILD_PARALLEL_LEVEL  build jobs (default: all CPUs)
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))


def project_version():
    """The VERSION of project(tierpack ...) in CMakeLists.txt: the one source of tierpack's version."""
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        match = re.search(r"project\(tierpack\s+VERSION\s+([0-9][0-9.]*)", f.read())
    if not match:
        raise RuntimeError("CMakeLists.txt: no project(tierpack VERSION x.y.z)")
    return match.group(1)


def run(cmd, **kwargs):
    sys.stderr.write("tierpack setup.py: %s\n" % " ".join(shlex.quote(c) for c in cmd))
    sys.stderr.flush()
    subprocess.run(cmd, check=True, **kwargs)


def cache_value(build_dir, key):
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


def major_minor(version):
    return tuple(version.split("+")[0].split(".")[:2])


def check_reused_build_dir(build_dir):
    """TIERPACK_BUILD_DIR must be a configured build of this source tree against this interpreter's torch."""
    home = cache_value(build_dir, "CMAKE_HOME_DIRECTORY")
    if home is None:
        raise RuntimeError("TIERPACK_BUILD_DIR=%s is not a configured CMake build directory" % build_dir)
    if os.path.realpath(home) != os.path.realpath(ROOT):
        raise RuntimeError("TIERPACK_BUILD_DIR=%s builds %s, not %s" % (build_dir, home, ROOT))
    if cache_value(build_dir, "TIERPACK_WITH_TORCH") in ("OFF", "0", "FALSE"):
        return
    stamp = os.path.join(build_dir, "lib", "libtierpack_torch.torch-version")
    try:
        with open(stamp) as f:
            built = f.read().strip()
    except OSError:
        return  # the build below writes it; the Python package checks it again at load time
    try:
        mine = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except subprocess.CalledProcessError:
        raise RuntimeError("%s cannot import torch, but TIERPACK_BUILD_DIR=%s was built against torch %s"
                           % (sys.executable, build_dir, built)) from None
    if major_minor(mine) != major_minor(built):
        raise RuntimeError("TIERPACK_BUILD_DIR=%s was built against torch %s, %s has torch %s"
                           % (build_dir, built, sys.executable, mine))


def is_off(value):
    return value is None or value.upper() in ("", "OFF", "0", "FALSE", "NO", "N") or value.upper().endswith("-NOTFOUND")


def check_gpu_tier(build_dir):
    """A build without the GPU tier for a torch with CUDA is refused, unless asked for (-DTIERPACK_WITH_CUDA=OFF)."""
    if not is_off(cache_value(build_dir, "TIERPACK_WITH_CUDA")) or is_off(cache_value(build_dir, "TIERPACK_WITH_TORCH")):
        return
    if "-DTIERPACK_WITH_CUDA=OFF" in shlex.split(os.environ.get("CMAKE_ARGS", "")):
        return
    cuda = subprocess.run([sys.executable, "-c", "import torch; print(torch.version.cuda or '')"],
                          capture_output=True, text=True).stdout.strip()
    if cuda:
        raise RuntimeError("%s builds tierpack without its GPU tier (no CUDA compiler found), but %s's torch has "
                           "CUDA %s: put nvcc on PATH or name it (CMAKE_ARGS=-DCMAKE_CUDA_COMPILER=/path/to/nvcc), "
                           "or build without the GPU tier on purpose (CMAKE_ARGS=-DTIERPACK_WITH_CUDA=OFF)"
                           % (build_dir, sys.executable, cuda))


def configure(build_dir):
    args = ["cmake", "-S", ROOT, "-B", build_dir,
            "-DCMAKE_BUILD_TYPE=" + os.environ.get("TIERPACK_BUILD_TYPE", "Release"),
            "-DTIERPACK_PYTHON=" + sys.executable,
            "-DTIERPACK_BUILD_TESTS=OFF", "-DTIERPACK_BUILD_BENCH=OFF"]
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")) and not os.environ.get("CMAKE_GENERATOR") \
            and shutil.which("ninja"):
        args += ["-G", "Ninja"]
    args += shlex.split(os.environ.get("CMAKE_ARGS", ""))
    run(args)


class BuildWithCMake(build_py):
    """build_py, then CMake: configure (unless TIERPACK_BUILD_DIR), build the runtime targets, install the
    runtime and Python components into a staging prefix, and lay them out in the package directory."""

    def run(self):
        super().run()
        if shutil.which("cmake") is None:
            raise RuntimeError("cmake not found: install it (Debian: apt-get install cmake; or pip install cmake)")
        reused = os.environ.get("TIERPACK_BUILD_DIR")
        if reused:
            build_dir = os.path.abspath(reused)
            check_reused_build_dir(build_dir)
        else:
            build_dir = os.path.join(ROOT, "build-pip", "cmake")
            configure(build_dir)
        check_gpu_tier(build_dir)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        run(["cmake", "--build", build_dir, "--target", "tierpack_runtime", "-j", jobs])

        stage = os.path.join(os.path.dirname(os.path.abspath(self.build_lib)), "cmake-install")
        shutil.rmtree(stage, ignore_errors=True)
        for component in ("tierpack_runtime", "tierpack_python"):
            run(["cmake", "--install", build_dir, "--prefix", stage, "--component", component])

        package = os.path.join(self.build_lib, "tierpack")
        self.lay_out(stage, package)
        self.check_version(os.path.join(package, "bin", "tierpack"))

    @staticmethod
    def lay_out(stage, package):
        os.makedirs(os.path.join(package, "bin"), exist_ok=True)
        os.makedirs(os.path.join(package, "lib"), exist_ok=True)
        shutil.copy2(os.path.join(stage, "bin", "tierpack"), os.path.join(package, "bin", "tierpack"))
        lib = os.path.join(stage, "lib")
        for name in sorted(os.listdir(lib)):
            path = os.path.join(lib, name)
            if os.path.isfile(path):  # libtierpack_*.so and their .torch-version stamps (not lib/tierpack/)
                shutil.copy2(path, os.path.join(package, "lib", name))
        python = os.path.join(lib, "tierpack", "python")
        if os.path.isdir(python):
            for name in sorted(os.listdir(os.path.join(python, "tierpack"))):
                if name.endswith(".py"):
                    shutil.copy2(os.path.join(python, "tierpack", name), os.path.join(package, name))
            os.makedirs(os.path.join(package, "_bootstrap"), exist_ok=True)
            shutil.copy2(os.path.join(python, "sitecustomize", "sitecustomize.py"),
                         os.path.join(package, "_bootstrap", "sitecustomize.py"))

    @staticmethod
    def check_version(cli):
        out = subprocess.run([cli, "--version"], check=True, capture_output=True, text=True).stdout.strip()
        want = "tierpack " + project_version()
        if out != want:
            raise RuntimeError("%s --version prints %r, CMakeLists.txt says %r: a stale build directory?"
                               % (cli, out, want))


class BinaryDistribution(Distribution):
    """The wheel holds native code: tagged for this platform and Python, installed into platlib."""

    def has_ext_modules(self):
        return True


setup(
    version=project_version(),
    cmdclass={"build_py": BuildWithCMake},
    distclass=BinaryDistribution,
    options={"build": {"build_base": os.path.join("build-pip", "setuptools")}},
    zip_safe=False,
)
