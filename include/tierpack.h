/* tierpack.h: the C ABI of tierpack's shared libraries, every entry point in one place, grouped by library:
 *
 *   libtierpack_torch.so       the host side in a PyTorch / LibTorch process (integrations/torch/c_api.cpp)
 *   libtierpack_cuda.so        the GPU tier: PyTorch's pluggable CUDA allocator, the settings read by name, the
 *                              storage mover's planner and copies (integrations/cuda/cuda_c_api.cpp)
 *   libtierpack_cuda_torch.so  libtierpack_cuda.so's allocator raising torch.OutOfMemoryError
 *                              (integrations/torch/cuda_oom_shim.cpp)
 *
 * The Python package loads the libraries and declares these signatures in one module (python/tierpack/_native.py);
 * the libraries' sources include this header, so the compiler checks each definition against its declaration.
 * Installed as <prefix>/include/tierpack.h. Every function catches everything (one deliberate exception:
 * tierpack_cuda_malloc): errors are return codes, with a one-line message from the library's last-error function.
 * Thread-safe. Returned strings stay valid until the calling thread's next call of the same function. */
#ifndef TIERPACK_H
#define TIERPACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TIERPACK_API __attribute__((visibility("default")))

/* ==== libtierpack_torch.so ==================================================================================== */

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

/* ==== libtierpack_cuda.so ===================================================================================== */
/* Devices are CUDA device indices (0..63), streams CUDA stream handles (torch.cuda.Stream.cuda_stream; 0 is CUDA's
 * default stream). Errors: tierpack_gpu_last_error(). TIERPACK_GPU_TEST_BACKEND=twin runs the allocator and the
 * copies on the memfd twin (host memory standing in for the device), for tests on machines without a GPU. */

/* -- PyTorch's pluggable CUDA allocator (torch.cuda.memory.CUDAPluggableAllocator), the VMM mechanism -- */
/* Allocates `size` bytes on `device` for `stream`. Out of memory throws a C++ exception through PyTorch's call,
 * which PyTorch raises as a RuntimeError with tierpack's message (Note [Out of memory through the pluggable
 * allocator] in integrations/cuda/cuda_c_api.cpp): the one entry point that does not catch everything. */
TIERPACK_API void* tierpack_cuda_malloc(ssize_t size, int device, void* stream);
/* The same, returning NULL on failure: for callers that raise their own error. */
TIERPACK_API void* tierpack_cuda_malloc_nothrow(ssize_t size, int device, void* stream);
/* The same, saying why it returned NULL: *status 0 (allocated, or size 0), 1 (out of memory under the budget: the
 * message names the budget, the tier and what is resident), 2 (any other failure). */
TIERPACK_API void* tierpack_cuda_malloc_status(ssize_t size, int device, void* stream, int* status);
/* Frees what tierpack_cuda_malloc* returned (NULL: nothing). */
TIERPACK_API void tierpack_cuda_free(void* ptr, ssize_t size, int device, void* stream);
/* Tensor.record_stream: the block's free waits for `stream`'s work, and the stream joins those held at the remap
 * gates (Note [Remap gate]). */
TIERPACK_API void tierpack_cuda_record_stream(void* ptr, void* stream);
/* `stream` may touch device `device`'s tierpack memory without allocating on it: the page-group mover holds it at
 * its remap gates. 0, or -1 (no runtime for that device yet: call it after the device's first allocation). */
TIERPACK_API int tierpack_cuda_add_stream(int device, void* stream);
/* Gives the device memory the runtimes cache back to the driver. */
TIERPACK_API void tierpack_cuda_empty_cache(void);

/* -- the GPU runtime -- */
/* Sets the settings before the first allocation: `conf` in TIERPACK_CONF syntax and `gpu` in TIERPACK_GPU syntax
 * (either may be NULL: the environment's value is used). 0, or -1 (a bad setting, or called after the first
 * allocation). */
TIERPACK_API int tierpack_gpu_configure(const char* conf, const char* gpu);
/* An iteration ended (optimizer step or tierpack.step()). 1 when the next iteration is traced (report its ops
 * through tierpack_gpu_op_*), else 0. */
TIERPACK_API int tierpack_gpu_iteration(void);
/* 1 while an iteration is traced, else 0. */
TIERPACK_API int tierpack_gpu_tracing(void);
/* An op of the traced iteration begins (the argument is unused) / begins with its name (recorded in the runtime's
 * profile) / uses the tensor whose data is at `p` / uses the `n` tensors whose data are at ptrs[0..n) / ends. */
TIERPACK_API void tierpack_gpu_op_begin(int64_t op);
TIERPACK_API void tierpack_gpu_op_begin_named(const char* name);
TIERPACK_API void tierpack_gpu_op_tensor(const void* p);
TIERPACK_API void tierpack_gpu_op_tensors(const uint64_t* ptrs, int64_t n);
TIERPACK_API void tierpack_gpu_op_end(int64_t op);
/* JSON statistics of one device ("{}" when it has no runtime). */
TIERPACK_API const char* tierpack_gpu_stats_json(int device);
/* One of the allocator's counters by name: "allocated", "allocated_peak", "reserved" (device bytes held: what the
 * budget limits), "reserved_peak", "host" (bytes of chunks on the host), "gpu_budget" (bytes). 0 when `device` has no
 * runtime yet; 0 with the error naming an unknown counter. */
TIERPACK_API uint64_t tierpack_gpu_memory_stat(int device, const char* name);
/* The settings, parsed once (core/config.hpp) from tierpack_gpu_configure's texts, else from $TIERPACK_CONF and
 * $TIERPACK_GPU, as one JSON object read by name: every key of docs/config.md by its TIERPACK_CONF name (switches
 * true/false, choices their word, numbers and sizes in bytes numbers, budgets {"bytes": N} or {"fraction": F} or
 * null), gpu_fill and gpu_headroom as the runtime uses them (defaults resolved), and gpu_fits_fraction (the live
 * peak, as a fraction of the budget, under which nothing moves). NULL with the error naming a bad key or value. */
TIERPACK_API const char* tierpack_settings_json(void);
/* Starts the peaks of tierpack_gpu_memory_stat again from the current values. */
TIERPACK_API void tierpack_gpu_reset_peak(int device);
/* The last error of any libtierpack_cuda.so call ("" if none). */
TIERPACK_API const char* tierpack_gpu_last_error(void);

/* -- the storage mover (python/tierpack/activations.py, mechanism:storage) -- */
/* The placer's plan: `trace_json` a SavedTrace, `options_json` {"limit_bytes", "d2h_bytes_per_s", "h2d_bytes_per_s",
 * "min_bytes", ...} (core/saved_trace.hpp, placer/saved_plan.hpp). The SavedPlan as JSON, or NULL with the error
 * naming the field that is wrong. Needs no GPU and no runtime. */
TIERPACK_API const char* tierpack_plan_saved(const char* trace_json, const char* options_json);
/* Copies in stream order (migrate/gpu/storage_copies.hpp; python/tierpack/copy_streams.py, Note [Raw copies]).
 * Each int-returning call returns -1 on failure. */
/* Makes device `device`'s copies ready (loads the driver). 0, or -1 (no CUDA device, ...). */
TIERPACK_API int tierpack_copies_open(int device);
/* A new event (no timing), or 0 on failure. */
TIERPACK_API uint64_t tierpack_copy_event_new(int device);
TIERPACK_API void tierpack_copy_event_free(int device, uint64_t event);
/* 1 when the work `event` was recorded after has run (or it was never recorded), 0 when not yet, -1 on failure. */
TIERPACK_API int tierpack_copy_event_done(int device, uint64_t event);
/* `stream` waits on the device for `event` (the host does not wait). 0, or -1. */
TIERPACK_API int tierpack_copy_stream_wait(int device, uint64_t stream, uint64_t event);
/* Queues `n` copies (dst[i] <- src[i], bytes[i] bytes, in order) on `copy_stream`, after the work queued so far on
 * `after` when `after_set` (else no such wait) and after each of the `n_waits` events of `waits` (0 entries
 * skipped), then records `done` (0: none) on `copy_stream`. 0, or -1 (nothing queued when an address is NULL). */
TIERPACK_API int tierpack_copy_batch(int device, int after_set, uint64_t after, uint64_t copy_stream,
                                     const uint64_t* waits, int n_waits, const uint64_t* dst, const uint64_t* src,
                                     const uint64_t* bytes, int n, uint64_t done);

/* ==== libtierpack_cuda_torch.so =============================================================================== */
/* Built against the torch that runs (its C++ ABI); python/tierpack/cuda.py hands these to CUDAPluggableAllocator
 * when it can load it. */
/* tierpack_cuda_malloc_status raising c10::OutOfMemoryError (torch.OutOfMemoryError) when the budget is exhausted
 * and c10::Error (RuntimeError) on any other failure. */
TIERPACK_API void* tierpack_cuda_torch_malloc(ssize_t size, int device, void* stream);
/* tierpack_cuda_free. */
TIERPACK_API void tierpack_cuda_torch_free(void* ptr, ssize_t size, int device, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* TIERPACK_H */
