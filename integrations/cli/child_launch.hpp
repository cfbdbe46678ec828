// Launching a training command under tierpack (`tierpack profile`, `tierpack run`): find the torch
// integration library and the Python bootstrap, prepare the child's environment (TIERPACK_CONF,
// sitecustomize on PYTHONPATH for Python, LD_PRELOAD for LibTorch programs), run it and return its
// exit status.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "integrations/cli/args.hpp"

namespace tierpack::cli {

/// The flags every command that launches a child under tierpack shares: --page-tracer KIND, --quiet,
/// --verbose, applied to the child's config. Throws usage_error for a bad tracer kind.
void apply_child_flags(const Args& args, Config& config);

/// Where the pieces a child needs are (build tree or install tree).
struct TierpackPaths {
  std::string torch_lib;          ///< libtierpack_torch.so
  std::string preload_lib;        ///< libtierpack_preload.so (the LD_PRELOAD shim), next to it
  std::string cuda_lib;           ///< libtierpack_cuda.so next to it, when built (else "")
  std::string python_dir;         ///< holds the `tierpack` package (or is it, see below)
  std::string sitecustomize_dir;  ///< holds the bootstrap sitecustomize.py
  /// pip's layout: python_dir is the package itself and the bootstrap (its _bootstrap/) loads it; only
  /// sitecustomize_dir goes on the child's PYTHONPATH.
  bool package_beside_bootstrap = false;
};

/// Finds them relative to this executable ($TIERPACK_LIB overrides the library). Throws
/// tierpack::error naming what is missing (e.g. a build without -DTIERPACK_WITH_TORCH=ON).
TierpackPaths find_tierpack_paths();

struct ChildLaunch {
  std::vector<std::string> argv;              ///< argv[0] resolved through PATH
  std::map<std::string, std::string> env;     ///< variables to set (on top of this environment)
  bool python = false;                        ///< bootstrapped through sitecustomize (else LD_PRELOAD)
  std::string how;                            ///< one line for the status output
};

/// A Config holding the GPU tier's keys the user set (TIERPACK_CONF's gpu_* and gpu_budget, or TIERPACK_GPU), and
/// nothing else: the commands write the child's TIERPACK_CONF from it and their flags, so those keys reach the
/// child (prepare_child empties TIERPACK_GPU there: its keys are in TIERPACK_CONF). A bad key is a usage_error,
/// before the command runs.
Config with_user_gpu_settings();

/// Prepares `command` to run with `conf` (TIERPACK_CONF). For a Python interpreter, checks that it can
/// import torch and throws tierpack::error naming one that can when it cannot.
ChildLaunch prepare_child(const std::vector<std::string>& command, const std::string& conf, const TierpackPaths& paths);

/// Runs the child and waits. Returns its exit status, or 128 + signal number when a signal ended it.
/// SIGTERM reaching tierpack is passed on to the child; Ctrl-C reaches the child from the terminal.
int run_child(const ChildLaunch& launch);

/// "exit status 3" / "killed by signal 9 (Killed)".
std::string describe_status(int status);

}  // namespace tierpack::cli
