# tierpack bootstrap for Python children of `tierpack profile` / `tierpack run`, which put this
# directory first on PYTHONPATH and set TIERPACK_CONF. When torch is imported (now or later), tierpack
# is enabled right after torch's own initialisation and before the script's first tensor. Any other
# sitecustomize on the path (e.g. Debian's /etc/python3.X/sitecustomize.py) still runs: it is found
# and executed first. Without TIERPACK_CONF this file only chains.
# Installed by pip, this file is tierpack/_bootstrap/sitecustomize.py and the `tierpack` package around it
# is the one it enables (the CLI puts only this directory on PYTHONPATH; _import_tierpack).
import os
import sys


def _chain_next_sitecustomize():
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or not spec.origin:
        return
    if os.path.abspath(spec.origin) == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the site's hook failing must not stop the program
        sys.stderr.write("tierpack: the chained sitecustomize (%s) failed: %s\n" % (spec.origin, e))


def _is_distributed_launcher():
    """Whether this process is torchrun's (or torch.distributed.launch's) launcher: it imports torch
    but trains nothing; its workers, started with this environment, are the ranks to enable."""
    argv0 = sys.argv[0] if sys.argv else ""
    base = os.path.basename(argv0)
    if base in ("torchrun", "torchrun.py"):
        return True
    parts = os.path.normpath(argv0).split(os.sep)
    return len(parts) >= 3 and parts[-3:-1] == ["torch", "distributed"] and base in ("run.py", "launch.py")


def _bad_configuration(e):
    """A TIERPACK_CONF or TIERPACK_GPU key or value the parser refused (docs/config.md)."""
    text = str(e)
    return "TIERPACK_CONF:" in text or "TIERPACK_GPU:" in text


def _import_tierpack():
    """The tierpack package: the one this file sits in (pip's layout, tierpack/_bootstrap/), else the one
    on sys.path (the CLI put its directory on PYTHONPATH)."""
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    init = os.path.join(package_dir, "__init__.py")
    if "tierpack" not in sys.modules and os.path.basename(package_dir) == "tierpack" and os.path.isfile(init):
        import importlib.util
        spec = importlib.util.spec_from_file_location("tierpack", init, submodule_search_locations=[package_dir])
        module = importlib.util.module_from_spec(spec)
        sys.modules["tierpack"] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop("tierpack", None)
            raise
        return module
    import tierpack
    return tierpack


def _enable_tierpack():
    if _is_distributed_launcher():
        # Keep TIERPACK_CONF for the workers (each one enables itself, with its own %r paths).
        return
    try:
        tierpack = _import_tierpack()
        # `tierpack run --gpu-budget`: the GPU tier must be PyTorch's CUDA allocator before the first
        # CUDA tensor, and it reads TIERPACK_CONF, which enable() removes from the environment. Whether the
        # settings ask for it is the library's reading of them (tierpack.cuda.settings()).
        import tierpack.cuda
        gpu_tier = tierpack.cuda.install_from_env()
        if gpu_tier:
            # Note [Host side steps aside] (core/config.hpp). The configuration leaves the environment before
            # the host library loads (loaded with it, the library enables itself); processes this one starts
            # inherit none, as after enable().
            conf = os.environ.pop("TIERPACK_CONF", "")
            if not tierpack.host_side_needed(conf):
                sys.stderr.write("tierpack: the host side stays off: nothing to place on the host (no "
                                 "--fast-budget, --plan, --tiers or -o); the GPU tier runs alone\n")
                return
            tierpack.enable(conf)
            return
        tierpack.enable()
    except Exception as e:  # noqa: BLE001 - training must run even when tierpack cannot
        if _bad_configuration(e):
            # A typo in a budget or key must not train untiered for hours: stop before the script starts.
            sys.stderr.write("tierpack: bad configuration, the program does not start: %s\n" % e)
            sys.stderr.flush()
            os._exit(2)
        sys.stderr.write("tierpack: not enabled: %s\n" % e)


class _TorchImportHook:
    """A one-shot meta-path finder: lets the normal finders locate torch, then runs tierpack's
    enable() right after the torch module has executed."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        import importlib.util
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module):
            original_exec(module)
            _enable_tierpack()

        loader.exec_module = exec_module
        return spec


def _report_if_torch_never_came():
    if "torch" not in sys.modules:
        sys.stderr.write("tierpack: this Python (%s) never imported torch: nothing was profiled "
                         "(is torch installed for this interpreter?)\n" % sys.executable)


def _bootstrap():
    # tierpack.enable() removes TIERPACK_CONF from the environment: processes this one starts (data
    # loader workers, subprocesses) are not profiled and never write the same profile.
    if not os.environ.get("TIERPACK_CONF"):
        return
    if "torch" in sys.modules:
        _enable_tierpack()
    else:
        sys.meta_path.insert(0, _TorchImportHook())
        import atexit
        atexit.register(_report_if_torch_never_came)


_chain_next_sitecustomize()
_bootstrap()
