"""Where this tierpack's native pieces are, relative to the package (no environment needed).

Three layouts, tried in this order:

* installed by pip (setup.py): ``<site-packages>/tierpack/`` holds ``bin/tierpack`` and ``lib/lib*.so``;
* installed by CMake (``cmake --install``): ``<prefix>/lib/tierpack/python/tierpack/``, with
  ``<prefix>/bin/tierpack`` and ``<prefix>/lib/lib*.so``;
* the source tree (``python/tierpack``), with a build directory ``build/`` at the repository root.
"""

import os

_here = os.path.dirname(os.path.abspath(__file__))


def _prefixes():
    """Candidate prefixes holding bin/ and lib/, best first."""
    return [
        _here,                                                  # pip: tierpack/{bin,lib}
        os.path.join(_here, os.pardir, os.pardir, os.pardir, os.pardir),  # cmake: <prefix>/lib/tierpack/python/tierpack
        os.path.join(_here, os.pardir, os.pardir, "build"),     # source tree: python/tierpack -> build/
    ]


def installed_library(name):
    """The path of the shared library `name` (e.g. "libtierpack_cuda.so") of this installation, or None."""
    for prefix in _prefixes():
        path = os.path.join(prefix, "lib", name)
        if os.path.isfile(path):
            return os.path.normpath(path)
    return None


def cli_path():
    """The `tierpack` executable of this installation, or None."""
    for prefix in _prefixes():
        path = os.path.join(prefix, "bin", "tierpack")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.normpath(path)
    return None
