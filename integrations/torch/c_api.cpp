// libtierpack_torch.so's entry points: the C ABI (include/tierpack.h), the C++ API (tierpack_torch.hpp) and
// the LD_PRELOAD constructor. The one process-wide Session lives here, created explicitly by
// tierpack_enable() (or the constructor, when $TIERPACK_CONF asks for it) and never destroyed: torch
// may free tensors, and run ops on other threads, until the very end of the process.
//
// Note [Process lifetime]
//   - exit: an atexit handler writes the profile (Python's package also registers one that runs while
//     the interpreter is alive, which comes first; finish() is idempotent).
//   - fork: a child (DataLoader workers) abandons the session without locking anything: it must never
//     write the parent's profile nor pay for recording.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>

#include "core/config.hpp"
#include "core/process_rank.hpp"
#include "core/version.hpp"
#include "runtime/host/run_controller.hpp"
#include "runtime/session/session.hpp"
#include "integrations/torch/python_source.hpp"
#include "integrations/torch/tierpack_torch.hpp"
#include "integrations/torch/torch_hooks.hpp"
#include "tierpack.h"

namespace {

using tierpack::Session;

std::mutex g_mu;
std::atomic<Session*> g_session{nullptr};  // never deleted (Note [Process lifetime])
std::atomic<bool> g_forked_child{false};
thread_local std::string g_error;

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : raw)
    if (c == '\0') c = ' ';
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw;
}

/// `--verbose`: how the Python source lines were found (Note [Python source]), once.
void log_source_stats(Session& s) {
  static std::atomic<bool> logged{false};
  if (s.config().log != tierpack::LogLevel::debug || logged.exchange(true)) return;
  if (!tierpack::python_source::available()) {
    s.log("python sources: none (no Python in this process, or python_source:off)");
    return;
  }
  const auto st = tierpack::python_source::stats();
  s.log("python sources: " + std::to_string(st.walks) + " stack walk(s), " + std::to_string(st.gil_held) +
        " with the GIL already held, " + std::to_string(st.found) + " found a frame outside torch");
}

void finish_at_exit() {
  if (Session* s = g_session.load()) {
    if (!g_forked_child.load()) {
      log_source_stats(*s);
      s->finish();
    }
  }
}

// No locks and no torch calls here: another thread may have held any of them at fork time. The op
// observer stays registered and finds nothing to do (the recorder wants no ops any more).
void fork_child() {
  g_forked_child.store(true);
  if (Session* s = g_session.load())
    if (auto* r = s->recorder()) r->abandon();
}

int enable(const char* conf_text) {
  std::lock_guard lock(g_mu);
  if (g_session.load()) return 1;
  const bool from_env = !(conf_text && *conf_text);
  const tierpack::Config config = from_env ? tierpack::config_from_env() : tierpack::parse_config(conf_text);
  // Only this process is profiled: processes it starts (workers, subprocesses) inherit no config and
  // never write the same profile.
  if (from_env) ::unsetenv("TIERPACK_CONF");
  if (config.mode == tierpack::RunMode::off) return 2;
  tierpack::SessionOptions options;
  options.command = command_line();
  options.framework = tierpack::torch_hooks::torch_version();
  options.rank = tierpack::process_rank_from_env();
  // Run mode: the RunController supplies CPU tensor memory and applies the plan (runtime/host).
  const bool run = config.mode == tierpack::RunMode::run;
  const bool given_plan = run && !config.plan_in.empty();
  tierpack::Config session_config = config;
  if (given_plan) {  // nothing is profiled: the recorder only finds iteration boundaries
    session_config.page_tracer = tierpack::PageTracerKind::off;
    session_config.warmup_iterations = 1 << 30;
    // The recorder never records, but stays "before the recording" (wants_sources()): no Python stack
    // walk and no module hooks at every allocation of the run (Note [Python source]).
    session_config.python_source = false;
  }
  if (run) options.create_host_memory = false;
  auto* session = new Session(session_config, options);
  if (run) tierpack::RunController::attach(*session, session_config);  // the session keeps it
  tierpack::torch_hooks::install(session);
  g_session.store(session);
  session->start();
  tierpack::torch_hooks::refresh_observer();
  std::atexit(finish_at_exit);
  pthread_atfork(nullptr, nullptr, fork_child);
  return 0;
}

template <class F>
int guarded(F&& f) noexcept {
  try {
    g_error.clear();
    return f();
  } catch (const std::exception& e) {
    g_error = e.what();
  } catch (...) {
    g_error = "unknown error";
  }
  return -1;
}

// Loaded by the LD_PRELOAD shim (integrations/preload/preload_shim.c) into an unmodified LibTorch program, by the
// Python package, or preloaded directly: enable from $TIERPACK_CONF (before main() when preloaded). Our
// dependencies (c10, torch_cpu) are initialised before this constructor runs.
__attribute__((constructor)) void tierpack_preload_init() {
  const char* conf = std::getenv("TIERPACK_CONF");
  if (!conf || !*conf) return;
  if (guarded([] { return enable(nullptr); }) < 0)
    std::fprintf(stderr, "tierpack: not enabled: %s\n", g_error.c_str());
}

}  // namespace

extern "C" {

int tierpack_enable(const char* conf) { return guarded([conf] { return enable(conf); }); }

int tierpack_enabled(void) { return g_session.load() ? 1 : 0; }

int tierpack_host_side_needed(const char* conf) {
  return guarded([conf] { return tierpack::host_side_needed(tierpack::parse_config(conf ? conf : "")) ? 1 : 0; });
}

int tierpack_step(void) {
  Session* s = g_session.load();
  if (!s) return -1;
  s->mark_iteration(tierpack::IterationSource::explicit_mark);
  return 0;
}

int tierpack_finish(void) {
  Session* s = g_session.load();
  if (!s) return -1;
  if (g_forked_child.load()) return 0;
  return guarded([s] {
    log_source_stats(*s);
    const int rc = s->finish() ? 0 : 1;
    tierpack::torch_hooks::refresh_observer();
    if (rc != 0) g_error = "profile not written (see the message above)";
    return rc;
  });
}

int tierpack_mark_tensor(const void* data, int role) {
  Session* s = g_session.load();
  if (!s || !data || role < 0 || role > TIERPACK_ROLE_OPTIMIZER_STATE) return -1;
  s->mark_tensor(static_cast<tierpack::TensorRole>(role), data);
  return 0;
}

int tierpack_wants_marks(void) {
  Session* s = g_session.load();
  return s && s->wants_marks() ? 1 : 0;
}

int tierpack_recording(void) {
  Session* s = g_session.load();
  return s && s->wants_op_tensors() ? 1 : 0;
}

int tierpack_wants_sources(void) {
  Session* s = g_session.load();
  return s && s->wants_sources() && tierpack::python_source::available() ? 1 : 0;
}

int tierpack_module_name(int id, const char* path) {
  return path && tierpack::python_source::name_module(id, path) ? 0 : -1;
}

void tierpack_module_enter(int id) { tierpack::python_source::module_enter(id); }

void tierpack_module_exit(int id) { tierpack::python_source::module_exit(id); }

void tierpack_module_reset(void) { tierpack::python_source::reset_modules(); }

size_t tierpack_status(char* buf, size_t size) {
  std::string text;
  try {
    Session* s = g_session.load();
    text = s ? s->status_json() : std::string("{\"mode\":\"disabled\"}");
  } catch (...) {
    text = "{\"mode\":\"error\"}";
  }
  if (buf && size > 0) {
    const size_t n = std::min(size - 1, text.size());
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return text.size();
}

const char* tierpack_last_error(void) { return g_error.c_str(); }

const char* tierpack_version(void) {
  static const std::string v = std::string(TIERPACK_VERSION) + " (" + tierpack::torch_hooks::torch_version() + ")";
  return v.c_str();
}

}  // extern "C"

namespace tierpack {

bool enable(const std::string& conf) {
  const int rc = tierpack_enable(conf.c_str());
  if (rc < 0) std::fprintf(stderr, "tierpack: not enabled: %s\n", tierpack_last_error());
  return rc == 0 || rc == 1;
}

void step() { tierpack_step(); }

bool finish() { return tierpack_finish() == 0; }

}  // namespace tierpack
