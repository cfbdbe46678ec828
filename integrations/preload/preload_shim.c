/* preload_shim.c -> libtierpack_preload.so: what `tierpack profile` (and `tierpack run`) put in LD_PRELOAD for commands
 * that are not Python. A C library with no dependencies, so preloading it changes nothing in processes
 * that are not LibTorch programs (a shell script wrapper, a launcher): there it does nothing and its
 * children inherit the environment. In a process that has libtorch loaded it dlopen()s
 * libtierpack_torch.so ($TIERPACK_LIB), whose constructor enables tierpack from $TIERPACK_CONF.
 *
 * Why not preload libtierpack_torch.so itself: its dependencies (libjemalloc's malloc, operator new)
 * would join the global symbol scope ahead of libstdc++ in programs that do not link it, and every
 * process of a wrapper script would load torch. Loaded with RTLD_LOCAL they stay private. The late
 * dlopen needs static TLS room for libjemalloc (GLIBC_TUNABLES, set by the tierpack command). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int find_torch(struct dl_phdr_info* info, size_t size, void* found) {
  (void)size;
  if (info->dlpi_name && strstr(info->dlpi_name, "libtorch_cpu.so")) {
    *(int*)found = 1;
    return 1;
  }
  return 0;
}

/* Runs after the libraries the program links (libtorch included) are initialised: preloaded objects
 * come right after the executable in the initialisation order. */
__attribute__((constructor)) static void tierpack_preload(void) {
  const char* conf = getenv("TIERPACK_CONF");
  if (!conf || !*conf) return;
  int torch = 0;
  dl_iterate_phdr(find_torch, &torch);
  if (!torch) return; /* not a LibTorch program */
  const char* lib = getenv("TIERPACK_LIB");
  if (!lib || !*lib) {
    fprintf(stderr, "tierpack: TIERPACK_LIB is not set: not enabled\n");
    return;
  }
  if (!dlopen(lib, RTLD_NOW | RTLD_LOCAL)) fprintf(stderr, "tierpack: not enabled: cannot load %s: %s\n", lib, dlerror());
}
