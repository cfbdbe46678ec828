/* The C ABI of libtierpack_torch.so: what the Python package calls through ctypes, and what any
 * other host (a C program, a launcher) may call. Every function catches everything: errors are
 * return codes, with a one-line message from tierpack_last_error(). Thread-safe. */
#ifndef TIERPACK_C_H
#define TIERPACK_C_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TIERPACK_API __attribute__((visibility("default")))

/* Roles for tierpack_mark_tensor (what the framework knows about a tensor). */
#define TIERPACK_ROLE_SAVED_FOR_BACKWARD 0
#define TIERPACK_ROLE_PARAMETER 1
#define TIERPACK_ROLE_GRADIENT 2
#define TIERPACK_ROLE_OPTIMIZER_STATE 3

/* Enables tierpack in this process: creates the session from `conf` (TIERPACK_CONF syntax; NULL or ""
 * reads $TIERPACK_CONF), installs the CPU allocator and the op observer. Idempotent: a second call
 * returns 1 and changes nothing. Returns 0 when enabled now, 1 when already enabled, 2 when the
 * configuration says mode:off (nothing installed), -1 on error. */
TIERPACK_API int tierpack_enable(const char* conf);
/* 1 when a session exists. */
TIERPACK_API int tierpack_enabled(void);
/* 1 when `conf` (TIERPACK_CONF syntax) gives the host side something to do, 0 when it only sets a GPU budget
   (Note [Host side steps aside] in core/config.hpp), -1 on a configuration error (tierpack_last_error()). */
TIERPACK_API int tierpack_host_side_needed(const char* conf);
/* Marks the end of an iteration (explicit boundary). 0, or -1 when not enabled. */
TIERPACK_API int tierpack_step(void);
/* Writes the profile (if profiling) and stops observing. 0 written or nothing to write, 1 the profile
 * could not be written (reason printed and in tierpack_last_error), -1 not enabled. Idempotent. */
TIERPACK_API int tierpack_finish(void);
/* Tells what the tensor whose data holds `data` is (TIERPACK_ROLE_*). 0, or -1 on bad input. */
TIERPACK_API int tierpack_mark_tensor(const void* data, int role);
/* 1 when role marks are useful now (a profile is being built), else 0. */
TIERPACK_API int tierpack_wants_marks(void);
/* 1 while an iteration is being recorded (the Python side then marks saved-for-backward tensors). */
TIERPACK_API int tierpack_recording(void);
/* 1 while allocations record where the program made them (its Python source line and module path:
 * the Python side then keeps the module hooks below on), else 0. */
TIERPACK_API int tierpack_wants_sources(void);
/* Module paths (Note [Module paths] in python_source.cpp). Names module `id` (0, 1, ...) by its path
 * ("transformer.h.3.mlp.c_fc"), once per id before tierpack_module_enter(id): 0, or -1 on a bad id or
 * when sources are not read. */
TIERPACK_API int tierpack_module_name(int id, const char* path);
/* The forward of module `id` starts / ends on the calling thread. */
TIERPACK_API void tierpack_module_enter(int id);
TIERPACK_API void tierpack_module_exit(int id);
/* The calling thread runs no module (an iteration boundary). */
TIERPACK_API void tierpack_module_reset(void);
/* Writes a one-line JSON status into buf (NUL-terminated, truncated to size); returns the full length. */
TIERPACK_API size_t tierpack_status(char* buf, size_t size);
/* The last error of the calling thread ("" if none). */
TIERPACK_API const char* tierpack_last_error(void);
/* "0.1.0 (torch 1.13.0)". */
TIERPACK_API const char* tierpack_version(void);

#ifdef __cplusplus
}
#endif

#endif /* TIERPACK_C_H */
