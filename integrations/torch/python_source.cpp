// The Python source line of an allocation (see python_source.hpp).
//
// Note [Python source]
// A profile names each tensor by where the program allocated it ("model.py:63 forward"), read when
// the CPU allocator is called (integrations/torch/torch_hooks.cpp), only while the recorder wants
// sources (before and during the profiled iteration: EventRecorder::wants_sources()); the steady
// state and a run with profiling off never get here.
//  - No link against libpython: tierpack's libraries also serve LibTorch programs. The CPython
//    functions are looked up with dlsym in the process's global scope (the python executable exports
//    them; a LibTorch program has none and gets no sources). Python >= 3.9 (PyFrame_GetCode/GetBack).
//  - The GIL. torch's Python bindings release the GIL around every op they dispatch (the generated
//    `pybind11::gil_scoped_release` in python_torch_functions), so almost every allocation runs on a
//    Python thread that does not hold it: reading frames only "when the GIL is held" finds nearly
//    nothing (measured: tests/integrations/scripts/source_cost.py prints both counts). So, like
//    torch's own CUDA memory history (`_record_memory_history` gathers its stacks the same way), a
//    thread that has a Python thread state but released the GIL takes it back for the stack walk
//    (PyGILState_Ensure/Release). Threads without a Python thread state (autograd's device threads,
//    intra-op pools) are skipped without touching the GIL. Taking the GIL from inside an op can wait
//    for another Python thread (a data loader's pin-memory thread) for up to the interpreter's switch
//    interval, and it could deadlock if that thread waited for a lock the op holds; torch's memory
//    history takes the same risk. `--python-source off` (TIERPACK_CONF python_source:off) turns it off.
//  - The frame: the innermost one whose file is not under torch's or tierpack's package directory
//    (torch.nn.functional, nn.Module.__call__, tierpack's hooks), at most kMaxDepth frames up. Per
//    code object its file, function name and whether it is skipped are cached (the code object is
//    kept alive so its address cannot be reused); only the line number is read per allocation.
//  - Nothing here throws or leaves a Python error behind: a pending exception is saved and restored
//    around the walk; an allocation made while walking (a GC finalizer) gets no source.
//
// Note [Module paths]
// With the source line comes the nn.Module whose forward was running ("transformer.h.3.mlp.c_fc"):
// the line alone cannot tell the 12 blocks of a transformer apart, they share it.
//  - The Python package (python/tierpack/_module_paths.py) registers torch's global forward pre- and
//    post-hooks while the recorder wants sources (they slow every module call down, so not for the
//    rest of the run). A module is named once, as the root model's named_modules() names it; a root
//    (a called module that no root named so far holds) by its class name. A submodule called on its
//    own before its model ever is becomes a root of its own, and keeps that name. Each distinct path
//    gets an id, and its text comes here once (name_module); the hooks then pass only the id
//    (module_enter/exit).
//  - The stack of running modules is kept here, per thread (thread_local): the allocation hook reads
//    its top in current() at no extra Python call, on the thread that runs the forward (torch runs an
//    op's allocations on the calling thread). A forward that raises never runs its post-hook: the
//    enclosing module's exit pops the stale entries, and an iteration boundary (the Python side's
//    step and optimizer-step hooks) clears the thread's stack.
//  - Backward: torch 1.13 has no global backward pre-hook, and global full backward hooks would add
//    nodes to every autograd graph (they would change what is profiled). So a tensor allocated in
//    backward has no module unless a forward runs there (activation checkpointing re-runs forwards);
//    Profile::module_text says "(backward)" for it, from its allocating op's phase.
//  - Module paths come with source lines: a source without a file (no Python frame found) carries
//    none, and python_source:off turns both off.
#include "integrations/torch/python_source.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tierpack::python_source {
namespace {

using PyObj = void;  // PyObject*, PyFrameObject*, PyCodeObject*: opaque here

/// The CPython C API functions used (all exported by Python >= 3.9).
struct Api {
  int (*Py_IsInitialized)() = nullptr;
  int (*IsFinalizing)() = nullptr;  // _Py_IsFinalizing (3.9-3.12) or Py_IsFinalizing (3.13)
  void* (*PyGILState_GetThisThreadState)() = nullptr;
  int (*PyGILState_Check)() = nullptr;
  int (*PyGILState_Ensure)() = nullptr;  // returns the PyGILState_STATE enum
  void (*PyGILState_Release)(int) = nullptr;
  PyObj* (*PyEval_GetFrame)() = nullptr;        // borrowed
  PyObj* (*PyFrame_GetBack)(PyObj*) = nullptr;  // new reference
  PyObj* (*PyFrame_GetCode)(PyObj*) = nullptr;  // new reference
  int (*PyFrame_GetLineNumber)(PyObj*) = nullptr;
  PyObj* (*PyObject_GetAttrString)(PyObj*, const char*) = nullptr;  // new reference
  const char* (*PyUnicode_AsUTF8)(PyObj*) = nullptr;
  PyObj* (*PySys_GetObject)(const char*) = nullptr;              // borrowed
  PyObj* (*PyDict_GetItemString)(PyObj*, const char*) = nullptr;  // borrowed
  void (*Py_IncRef)(PyObj*) = nullptr;
  void (*Py_DecRef)(PyObj*) = nullptr;
  void (*PyErr_Fetch)(PyObj**, PyObj**, PyObj**) = nullptr;
  void (*PyErr_Restore)(PyObj*, PyObj*, PyObj*) = nullptr;
  void (*PyErr_Clear)() = nullptr;
};

constexpr int kMaxDepth = 64;  // frames walked up from the innermost before giving up

template <class F>
bool resolve(F& fn, const char* name) {
  fn = reinterpret_cast<F>(::dlsym(RTLD_DEFAULT, name));
  return fn != nullptr;
}

struct CodeInfo {
  std::string file, function;
  bool skip = false;
};

// Process-wide, like the allocator hook that calls it; created by init(), never destroyed (tensors
// are freed and allocated during interpreter shutdown, after static destructors may have run).
struct State {
  Api api;
  // Guards the rest, held only around C++ work: never while calling Python, which may run a finalizer
  // that lets another thread take the GIL and come here (it would wait for us, we for the GIL).
  std::mutex mu;
  std::unordered_map<const void*, CodeInfo> codes;  // code object (kept alive) -> what it is
  std::vector<std::string> package_dirs;            // "/usr/lib/python3/dist-packages/torch/", ...
  bool dirs_complete = false;
  std::deque<std::string> module_paths;  // by id (Note [Module paths]); a deque: views stay valid as it grows
};

constexpr std::int32_t kMaxModuleIds = 1 << 20;  // distinct module paths; more are not named

// The modules whose forward runs on this thread, innermost last (ids into State::module_paths).
thread_local std::vector<std::int32_t> t_modules;

State* g_state = nullptr;
std::once_flag g_init_once;
bool g_available = false;
std::atomic<std::uint64_t> g_walks{0}, g_gil_held{0}, g_found{0};

std::string text_of(const Api& api, PyObj* obj, const char* attr) {
  PyObj* v = api.PyObject_GetAttrString(obj, attr);
  if (!v) {
    api.PyErr_Clear();
    return {};
  }
  const char* utf8 = api.PyUnicode_AsUTF8(v);
  std::string out = utf8 ? utf8 : "";
  if (!utf8) api.PyErr_Clear();
  api.Py_DecRef(v);
  return out;
}

/// The directories of the torch and tierpack packages, from sys.modules (until both are found).
void find_package_dirs(State& s) {
  {
    std::lock_guard lock(s.mu);
    if (s.dirs_complete) return;
  }
  PyObj* modules = s.api.PySys_GetObject("modules");
  if (!modules) return;
  std::vector<std::string> dirs;
  for (const char* name : {"torch", "tierpack"}) {
    PyObj* mod = s.api.PyDict_GetItemString(modules, name);
    if (!mod) continue;
    std::string file = text_of(s.api, mod, "__file__");  // .../torch/__init__.py
    const auto slash = file.find_last_of('/');
    if (slash != std::string::npos) dirs.push_back(file.substr(0, slash + 1));
  }
  std::lock_guard lock(s.mu);
  s.dirs_complete = dirs.size() == 2;
  s.package_dirs = std::move(dirs);
}

bool is_skipped(const State& s, const std::string& file) {
  for (const auto& dir : s.package_dirs)
    if (file.compare(0, dir.size(), dir) == 0) return true;
  // torch not imported yet (or without __file__): its files by name.
  return !s.dirs_complete && file.find("/torch/") != std::string::npos;
}

/// What `code` is (the reference stays valid: entries are never removed).
const CodeInfo& info_of(State& s, PyObj* code) {
  {
    std::lock_guard lock(s.mu);
    if (auto it = s.codes.find(code); it != s.codes.end()) return it->second;
  }
  find_package_dirs(s);
  CodeInfo info;
  info.file = text_of(s.api, code, "co_filename");
  info.function = text_of(s.api, code, "co_name");
  std::lock_guard lock(s.mu);
  info.skip = info.file.empty() || is_skipped(s, info.file);
  const auto [it, inserted] = s.codes.emplace(code, std::move(info));
  if (inserted) s.api.Py_IncRef(code);  // keep it alive: its address is the key
  return it->second;
}

/// Saves the pending Python exception (if any) and puts it back, dropping any error raised between.
class ErrorKeeper {
 public:
  explicit ErrorKeeper(const Api& api) : api_(api) { api_.PyErr_Fetch(&type_, &value_, &tb_); }
  ~ErrorKeeper() {
    api_.PyErr_Clear();
    api_.PyErr_Restore(type_, value_, tb_);
  }
  ErrorKeeper(const ErrorKeeper&) = delete;
  ErrorKeeper& operator=(const ErrorKeeper&) = delete;

 private:
  const Api& api_;
  PyObj *type_ = nullptr, *value_ = nullptr, *tb_ = nullptr;
};

/// The walk, with the GIL held.
SourceRef innermost_user_frame(State& s) {
  const Api& api = s.api;
  const ErrorKeeper keep(api);
  SourceRef out;
  PyObj* frame = api.PyEval_GetFrame();
  if (frame) api.Py_IncRef(frame);
  for (int depth = 0; frame && depth < kMaxDepth; ++depth) {
    PyObj* code = api.PyFrame_GetCode(frame);
    if (code) {
      const CodeInfo& info = info_of(s, code);
      api.Py_DecRef(code);
      if (!info.skip) {
        const int line = api.PyFrame_GetLineNumber(frame);
        out = SourceRef{info.file, line > 0 ? line : 0, info.function};
        break;
      }
    }
    PyObj* back = api.PyFrame_GetBack(frame);
    api.Py_DecRef(frame);
    frame = back;
  }
  if (frame) api.Py_DecRef(frame);
  return out;
}

void init_once(bool enabled) {
  if (!enabled) return;
  Api a;
  bool ok = resolve(a.Py_IsInitialized, "Py_IsInitialized") &&
            resolve(a.PyGILState_GetThisThreadState, "PyGILState_GetThisThreadState") &&
            resolve(a.PyGILState_Check, "PyGILState_Check") && resolve(a.PyGILState_Ensure, "PyGILState_Ensure") &&
            resolve(a.PyGILState_Release, "PyGILState_Release") && resolve(a.PyEval_GetFrame, "PyEval_GetFrame") &&
            resolve(a.PyFrame_GetBack, "PyFrame_GetBack") && resolve(a.PyFrame_GetCode, "PyFrame_GetCode") &&
            resolve(a.PyFrame_GetLineNumber, "PyFrame_GetLineNumber") &&
            resolve(a.PyObject_GetAttrString, "PyObject_GetAttrString") &&
            resolve(a.PyUnicode_AsUTF8, "PyUnicode_AsUTF8") && resolve(a.PySys_GetObject, "PySys_GetObject") &&
            resolve(a.PyDict_GetItemString, "PyDict_GetItemString") && resolve(a.Py_IncRef, "Py_IncRef") &&
            resolve(a.Py_DecRef, "Py_DecRef") && resolve(a.PyErr_Fetch, "PyErr_Fetch") &&
            resolve(a.PyErr_Restore, "PyErr_Restore") && resolve(a.PyErr_Clear, "PyErr_Clear");
  if (!ok) return;
  if (!resolve(a.IsFinalizing, "Py_IsFinalizing")) resolve(a.IsFinalizing, "_Py_IsFinalizing");
  g_state = new State{};
  g_state->api = a;
  g_available = true;
}

}  // namespace

bool init(bool enabled) noexcept {
  try {
    std::call_once(g_init_once, init_once, enabled);
  } catch (...) {
    g_available = false;
  }
  return g_available;
}

bool available() noexcept { return g_available; }

SourceRef current() noexcept {
  if (!g_available) return {};
  thread_local bool busy = false;  // an allocation made by the walk itself (a finalizer run by the GC)
  if (busy) return {};
  State& s = *g_state;
  const Api& api = s.api;
  // No Python on this thread (autograd's device threads, intra-op pools): nothing to read, and no GIL
  // to take.
  if (!api.Py_IsInitialized() || !api.PyGILState_GetThisThreadState()) return {};
  if (api.IsFinalizing && api.IsFinalizing()) return {};
  busy = true;
  // Note [Python source]: the thread usually released the GIL around the op; take it back.
  const bool held = api.PyGILState_Check() != 0;
  const int gil = held ? 0 : api.PyGILState_Ensure();
  SourceRef out;
  try {
    out = innermost_user_frame(s);
    if (!out.empty() && !t_modules.empty()) {  // Note [Module paths]
      std::lock_guard lock(s.mu);
      const auto id = static_cast<std::size_t>(t_modules.back());
      if (id < s.module_paths.size()) out.module = s.module_paths[id];
    }
  } catch (...) {
    out = {};  // bad_alloc while caching: this allocation goes without a source
  }
  if (!held) api.PyGILState_Release(gil);
  busy = false;
  g_walks.fetch_add(1, std::memory_order_relaxed);
  if (held) g_gil_held.fetch_add(1, std::memory_order_relaxed);
  if (!out.empty()) g_found.fetch_add(1, std::memory_order_relaxed);
  return out;
}

bool name_module(std::int32_t id, std::string_view path) noexcept {
  if (!g_available || id < 0 || id >= kMaxModuleIds || path.empty()) return false;
  State& s = *g_state;
  try {
    std::lock_guard lock(s.mu);
    const auto i = static_cast<std::size_t>(id);
    if (i >= s.module_paths.size()) s.module_paths.resize(i + 1);
    if (s.module_paths[i].empty()) s.module_paths[i] = path;  // an id's text never changes once views exist
    return s.module_paths[i] == path;
  } catch (...) {
    return false;
  }
}

void module_enter(std::int32_t id) noexcept {
  if (!g_available || id < 0) return;
  try {
    t_modules.push_back(id);
  } catch (...) {
    // out of memory: this forward's allocations are named by the enclosing module
  }
}

void module_exit(std::int32_t id) noexcept {
  for (auto i = t_modules.size(); i-- > 0;) {
    if (t_modules[i] != id) continue;
    t_modules.resize(i);
    return;
  }
}

void reset_modules() noexcept { t_modules.clear(); }

Stats stats() noexcept {
  return {g_walks.load(std::memory_order_relaxed), g_gil_held.load(std::memory_order_relaxed),
          g_found.load(std::memory_order_relaxed)};
}

}  // namespace tierpack::python_source
