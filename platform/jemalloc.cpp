// The jemalloc entry points from a privately loaded libjemalloc (see jemalloc.hpp).
//
// Note [jemalloc loaded privately]
// libjemalloc.so exports malloc, free and every operator new/delete besides the mallocx API tierpack
// uses. Linked as a dependency of libtierpack_torch.so (which Python dlopen()s with a local scope), it
// took part in resolving that library's own undefined symbols, and which allocator a given operator
// bound to depended on the toolchain's link order: on the GPU machine (GCC 13 in /opt/gcc, libstdc++
// linked statically) `operator new(size_t, nothrow_t)` inside std::stable_sort's temporary buffer bound
// to jemalloc's while the matching delete was libstdc++'s, and glibc's free() aborted on jemalloc's
// pointer at the end of the first profiled iteration ("free(): invalid pointer",
// bench/results/gpu-h200-2026-12-02, calls 2-3). Naming libstdc++ first on the link line (the earlier
// fix) did not survive that toolchain. So no tierpack library links jemalloc: this file dlopen()s it
// with RTLD_LOCAL, where its symbols serve only the six functions looked up here, and every
// malloc/new in the process stays the process's own. jemalloc still needs static TLS room when loaded
// late (GLIBC_TUNABLES, set by the tierpack command). The library: "libjemalloc.so.2" through the
// loading library's RUNPATH and the system's search path, else the file CMake found at configure time.
#include "platform/jemalloc.hpp"

#include <dlfcn.h>

#include <cerrno>

#ifndef TIERPACK_JEMALLOC_LIBRARY
#define TIERPACK_JEMALLOC_LIBRARY "libjemalloc.so.2"
#endif

namespace tierpack::platform::jemalloc {
namespace {

struct Api {
  void* (*mallocx)(std::size_t, int) = nullptr;
  void (*sdallocx)(void*, std::size_t, int) = nullptr;
  void (*dallocx)(void*, int) = nullptr;
  std::size_t (*nallocx)(std::size_t, int) = nullptr;
  std::size_t (*sallocx)(const void*, int) = nullptr;
  int (*mallctl)(const char*, void*, std::size_t*, void*, std::size_t) = nullptr;
  std::string error;  // empty when loaded
};

template <class F>
bool resolve(void* handle, F& fn, const char* name) {
  fn = reinterpret_cast<F>(::dlsym(handle, name));
  return fn != nullptr;
}

Api load() {
  Api a;
  void* handle = nullptr;
  std::string tried;
  for (const char* name : {"libjemalloc.so.2", TIERPACK_JEMALLOC_LIBRARY}) {
    handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle) break;
    const char* why = ::dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (why ? why : name);
  }
  if (!handle) {
    a.error = "cannot load libjemalloc (install libjemalloc2; a process that loads it late needs "
              "GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536, which the tierpack command sets): " + tried;
    return a;
  }
  if (!(resolve(handle, a.mallocx, "mallocx") && resolve(handle, a.sdallocx, "sdallocx") &&
        resolve(handle, a.dallocx, "dallocx") && resolve(handle, a.nallocx, "nallocx") && resolve(handle, a.sallocx, "sallocx") &&
        resolve(handle, a.mallctl, "mallctl"))) {
    a = Api{};
    a.error = "libjemalloc lacks the mallocx API (jemalloc 4 or newer is needed)";
  }
  return a;
}

const Api& api() noexcept {
  static const Api a = load();  // the handle stays open for the process's life
  return a;
}

}  // namespace

bool available() noexcept { return api().error.empty(); }
const std::string& load_error() noexcept { return api().error; }

void* mallocx(std::size_t size, int flags) noexcept { return api().mallocx ? api().mallocx(size, flags) : nullptr; }
void sdallocx(void* p, std::size_t size, int flags) noexcept {
  if (api().sdallocx) api().sdallocx(p, size, flags);
}
void dallocx(void* p, int flags) noexcept {
  if (api().dallocx) api().dallocx(p, flags);
}
std::size_t nallocx(std::size_t size, int flags) noexcept { return api().nallocx ? api().nallocx(size, flags) : 0; }
std::size_t sallocx(const void* p, int flags) noexcept { return api().sallocx ? api().sallocx(p, flags) : 0; }
int mallctl(const char* name, void* oldp, std::size_t* oldlenp, void* newp, std::size_t newlen) noexcept {
  return api().mallctl ? api().mallctl(name, oldp, oldlenp, newp, newlen) : ENOSYS;
}

}  // namespace tierpack::platform::jemalloc
