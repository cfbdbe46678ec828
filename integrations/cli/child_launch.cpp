// Child launching for tierpack subcommands (see child_launch.hpp).
#include "integrations/cli/child_launch.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace tierpack::cli {
namespace fs = std::filesystem;

namespace {

// Space for libjemalloc's initial-exec TLS when a Python process dlopen()s the integration
// (runtime/session/profiling_arena.hpp).
constexpr const char* kStaticTlsTunable = "glibc.rtld.optional_static_tls=65536";

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

std::string self_exe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw os_error("readlink(/proc/self/exe)", ec.value());
  return p.string();
}

/// argv[0] as execvp would find it.
std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) != 0) throw error("cannot run '" + name + "': " + std::strerror(errno));
    return name;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  std::size_t pos = 0;
  while (pos <= dirs.size()) {
    std::size_t end = dirs.find(':', pos);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(pos, end - pos);
    const std::string cand = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (::access(cand.c_str(), X_OK) == 0 && is_file(cand)) return cand;
    pos = end + 1;
  }
  throw error("command not found: " + name);
}

bool looks_like_python(const std::string& program) {
  const std::string base = fs::path(program).filename().string();
  return base.rfind("python", 0) == 0;
}

/// The Python interpreter a script names in its `#!` line (`#!/usr/bin/python3`,
/// `#!/usr/bin/env python3`), or "" when it is not a Python script. Launchers such as `torchrun` are
/// Python scripts: their workers inherit the bootstrap through PYTHONPATH.
std::string shebang_python(const std::string& program) {
  std::string line;
  try {  // the first line only, from a regular file (a FIFO or device must not block or stream forever)
    line = InputFile(program, UINT64_MAX).read(256);
  } catch (const error&) {
    return "";
  }
  line = line.substr(0, line.find('\n'));
  if (line.rfind("#!", 0) != 0) return "";
  std::istringstream words(line.substr(2));
  std::string interp, arg;
  words >> interp >> arg;
  if (fs::path(interp).filename() == "env") {
    if (arg.empty() || !looks_like_python(arg)) return "";
    return resolve_program(arg);
  }
  return looks_like_python(interp) ? interp : "";
}

/// Whether `python` can import torch (find_spec only: importing torch takes seconds).
bool python_has_torch(const std::string& python) {
  const pid_t pid = ::fork();
  if (pid < 0) throw os_error("fork", errno);
  if (pid == 0) {
    const char* code = "import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('torch') else 3)";
    ::execl(python.c_str(), python.c_str(), "-c", code, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string prepend(const std::string& head, const char* existing) {
  if (!existing || !*existing) return head;
  return head + ":" + existing;
}

}  // namespace

TierpackPaths find_tierpack_paths() {
  TierpackPaths p;
  const fs::path exe_dir = fs::path(self_exe()).parent_path();  // <build>/bin or <prefix>/bin
  if (const char* env = std::getenv("TIERPACK_LIB"); env && *env) {
    p.torch_lib = env;
  } else if (is_file(exe_dir / ".." / "lib" / "libtierpack_torch.so")) {
    p.torch_lib = fs::weakly_canonical(exe_dir / ".." / "lib" / "libtierpack_torch.so").string();
  }
  if (p.torch_lib.empty() || !is_file(p.torch_lib))
    throw error("libtierpack_torch.so not found next to " + exe_dir.string() +
                " (build tierpack with -DTIERPACK_WITH_TORCH=ON, or set TIERPACK_LIB)");
  p.preload_lib = (fs::path(p.torch_lib).parent_path() / "libtierpack_preload.so").string();
  if (const fs::path cuda = fs::path(p.torch_lib).parent_path() / "libtierpack_cuda.so"; is_file(cuda))
    p.cuda_lib = cuda.string();
  // Installed by pip (setup.py): this binary is <site-packages>/tierpack/bin/tierpack, the bootstrap is
  // tierpack/_bootstrap/sitecustomize.py and loads the package around it (nothing else of site-packages
  // goes on the child's PYTHONPATH).
  const fs::path package = exe_dir / "..";
  if (is_file(package / "__init__.py") && is_file(package / "_bootstrap" / "sitecustomize.py")) {
    p.python_dir = fs::weakly_canonical(package).string();
    p.sitecustomize_dir = fs::weakly_canonical(package / "_bootstrap").string();
    p.package_beside_bootstrap = true;
    return p;
  }
  // Install tree first (<prefix>/lib/tierpack/python), then the source tree this binary was built from.
  const fs::path installed = exe_dir / ".." / "lib" / "tierpack" / "python";
#ifdef TIERPACK_SOURCE_PYTHON_DIR
  const fs::path source = TIERPACK_SOURCE_PYTHON_DIR;
#else
  const fs::path source;
#endif
  for (const fs::path& dir : {installed, source}) {
    if (!dir.empty() && is_file(dir / "tierpack" / "__init__.py") &&
        is_file(dir / "sitecustomize" / "sitecustomize.py")) {
      p.python_dir = fs::weakly_canonical(dir).string();
      p.sitecustomize_dir = fs::weakly_canonical(dir / "sitecustomize").string();
      break;
    }
  }
  return p;
}

Config with_user_gpu_settings() {
  Config c;
  try {
    const Config user = config_from_env();
    c.gpu = user.gpu;
    c.gpu_budget = user.gpu_budget;
  } catch (const logic_error& e) {
    throw usage_error(e.what());
  }
  return c;
}

ChildLaunch prepare_child(const std::vector<std::string>& command, const std::string& conf,
                          const TierpackPaths& paths) {
  TIERPACK_EXPECTS(!command.empty(), "empty command");
  ChildLaunch c;
  c.argv = command;
  c.argv[0] = resolve_program(command[0]);
  c.env["TIERPACK_CONF"] = conf;
  c.env["TIERPACK_GPU"] = "";  // its keys are in `conf` (with_user_gpu_settings)
  c.env["TIERPACK_LIB"] = paths.torch_lib;
  const char* cuda_env = std::getenv("TIERPACK_CUDA_LIB");
  if (!paths.cuda_lib.empty() && !(cuda_env && *cuda_env))
    c.env["TIERPACK_CUDA_LIB"] = paths.cuda_lib;  // this build's GPU tier
  const std::string interpreter = looks_like_python(c.argv[0]) ? c.argv[0] : shebang_python(c.argv[0]);
  c.python = !interpreter.empty();
  if (c.python) {
    if (paths.python_dir.empty())
      throw error("the tierpack Python bootstrap (python/tierpack, python/sitecustomize) was not found");
    if (!python_has_torch(interpreter)) {
      std::string hint;
      for (const char* cand : {"/usr/bin/python3", "/usr/local/bin/python3"})
        if (cand != interpreter && ::access(cand, X_OK) == 0 && python_has_torch(cand)) {
          hint = "; " + std::string(cand) + " can (use it: tierpack profile ... -- " + cand + " script.py)";
          break;
        }
      throw error(interpreter + " cannot import torch" + hint);
    }
    const std::string path_head =
        paths.package_beside_bootstrap ? paths.sitecustomize_dir : paths.sitecustomize_dir + ":" + paths.python_dir;
    c.env["PYTHONPATH"] = prepend(path_head, std::getenv("PYTHONPATH"));
    c.how = "Python: bootstrap through sitecustomize (" + paths.sitecustomize_dir + ")";
  } else {
    if (!is_file(paths.preload_lib)) throw error("the preload library " + paths.preload_lib + " is missing");
    c.env["LD_PRELOAD"] = prepend(paths.preload_lib, std::getenv("LD_PRELOAD"));
    c.how = "LD_PRELOAD=" + paths.preload_lib;
  }
  // Both paths dlopen() the integration late: libjemalloc needs static TLS room then.
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  c.env["GLIBC_TUNABLES"] =
      (tunables && *tunables) ? std::string(tunables) + ":" + kStaticTlsTunable : kStaticTlsTunable;
  return c;
}

namespace {
volatile sig_atomic_t g_child = 0;
// Note [Signals to tierpack]
// A SIGTERM aimed at tierpack is passed on to the child. So is a SIGINT sent to tierpack alone (`kill -INT`,
// si_code <= 0: sent by a process); a Ctrl-C from the terminal (si_code SI_KERNEL) reaches the child by
// itself (same process group), so passing it on would interrupt the child's own clean-up. The child gets
// SIGTERM if tierpack dies first (PR_SET_PDEATHSIG), so a killed launcher leaves no orphan training on.
void forward_signal(int sig, siginfo_t* info, void*) {
  if (g_child <= 0) return;
  if (sig == SIGINT && info && info->si_code > 0) return;
  ::kill(static_cast<pid_t>(g_child), sig);
}
}  // namespace

int run_child(const ChildLaunch& launch) {
  std::vector<char*> argv;
  for (const auto& a : launch.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw os_error("fork", errno);
  if (pid == 0) {
    // Note [Signals to tierpack]: the child dies with its launcher (checked again in case it already died).
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);
    for (const auto& [k, v] : launch.env) ::setenv(k.c_str(), v.c_str(), 1);
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "tierpack: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  g_child = pid;
  // Note [Signals to tierpack]: tierpack waits for the child to finish writing; signals go to it.
  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_sigaction = forward_signal;
  sa.sa_flags = SA_SIGINFO;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw os_error("waitpid", errno);
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  g_child = 0;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string describe_status(int status) {
  if (status > 128 && status < 128 + 65) {
    const int sig = status - 128;
    return "killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  return "exit status " + std::to_string(status);
}

void apply_child_flags(const Args& args, Config& config) {
  if (auto t = args.get("--page-tracer")) {
    try {
      config.page_tracer = parse_config("page_tracer:" + *t).page_tracer;
    } catch (const logic_error&) {
      throw usage_error("--page-tracer must be auto, mprotect, uffd or off, not '" + *t + "'");
    }
  }
  if (auto p = args.get("--python-source")) {
    if (*p != "on" && *p != "off") throw usage_error("--python-source must be on or off, not '" + *p + "'");
    config.python_source = *p == "on";
  }
  if (args.has("--quiet")) config.log = LogLevel::quiet;
  if (args.has("--verbose")) config.log = LogLevel::debug;
}

}  // namespace tierpack::cli
