// libtierpack_cuda.so's C ABI (declared in include/tierpack.h): the C functions PyTorch's CUDAPluggableAllocator
// loads, plus the op/iteration events, statistics, settings, the storage mover's planner and copies that the Python
// side (python/tierpack/_native.py) and the torch integration call.
//
// The process-wide state PyTorch's C ABI forces on us lives here, in one registry created on first
// use and never destroyed (tensors are still freed while the interpreter shuts down). Every entry
// point catches everything, with one deliberate exception below.
//
// Note [Out of memory through the pluggable allocator]
// PyTorch (2.11) does not check the pointer a pluggable allocator returns: a nullptr becomes a tensor
// whose first kernel faults with an illegal address, which kills the CUDA context (measured on the
// H200, bench/results/). So tierpack_cuda_malloc reports out-of-memory by throwing a C++ exception
// derived from std::exception through PyTorch's std::function call; PyTorch turns it into a Python
// RuntimeError carrying our message (requested size, tier, budget, what is resident where), and the
// process can free memory and continue. A torch.OutOfMemoryError proper needs c10::OutOfMemoryError,
// i.e. torch headers: libtierpack_cuda_torch.so (integrations/torch/cuda_oom_shim.cpp, built against
// the torch that runs) wraps tierpack_cuda_malloc_status and throws it; python/tierpack/cuda.py uses
// that library when it loads. Every other failure is caught here.
//
// TIERPACK_GPU_TEST_BACKEND=twin makes the runtimes use the memfd VMM twin instead of CUDA (host
// memory standing in for the device: no kernel can use it). It exists only so that the C entry points
// and the shim above can be tested end to end on machines without a GPU.
#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "alloc/gpu/cuda_backend.hpp"
#include "alloc/gpu/memfd_backend.hpp"
#include "core/error.hpp"
#include "core/saved_trace.hpp"
#include "runtime/gpu/gpu_runtime.hpp"
#include "runtime/gpu/gpu_runtime_options.hpp"
#include "migrate/gpu/storage_copies.hpp"
#include "placer/saved_plan.hpp"
#include "tierpack.h"

namespace tierpack::gpu {
namespace {

constexpr int kMaxDevices = 64;

struct Registry {
  std::mutex m;
  std::array<std::atomic<GpuRuntime*>, kMaxDevices> devices{};
  std::array<std::atomic<StorageCopies*>, kMaxDevices> copies{};  // the storage mover's, with a backend each
  std::optional<tierpack::Config> settings;  // from tierpack_gpu_configure, else the environment
  std::string last_error;
  bool announced_failure = false;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: frees arrive during interpreter shutdown
  return *r;
}

void remember(const std::string& msg) {
  Registry& r = registry();
  std::lock_guard lk(r.m);
  r.last_error = msg;
}

/// The device's backend: CUDA, or the memfd twin under TIERPACK_GPU_TEST_BACKEND=twin.
std::unique_ptr<VmmBackend> make_backend(int device) {
  if (const char* b = std::getenv("TIERPACK_GPU_TEST_BACKEND"); b && std::string_view(b) == "twin")
    return std::make_unique<MemfdBackend>();
  CudaBackendOptions bo;
  bo.device = device;
  return std::make_unique<CudaVmmBackend>(bo);
}

void check_device(int device) {
  if (device < 0 || device >= kMaxDevices) throw logic_error("CUDA device " + std::to_string(device) + " out of range");
}

/// What `slot` holds, made by make() under the registry's lock at the first call (never destroyed).
template <class T, class Make>
T& made_once(std::atomic<T*>& slot, Make make) {
  if (T* p = slot.load(std::memory_order_acquire)) return *p;
  std::lock_guard lk(registry().m);
  if (T* p = slot.load(std::memory_order_acquire)) return *p;
  T* p = make();
  slot.store(p, std::memory_order_release);
  return *p;
}

GpuRuntime& runtime(int device) {
  check_device(device);
  Registry& r = registry();
  return made_once(r.devices[device], [&r, device] {
    if (!r.settings) r.settings = tierpack::config_from_env();
    auto* rt = new GpuRuntime(make_backend(device), *r.settings, device);
    if (r.settings->log != LogLevel::quiet) std::fprintf(stderr, "tierpack: %s\n", rt->describe().c_str());
    return rt;
  });
}

/// The storage mover's copies on `device`, made at the first call (a backend of their own: the storage mechanism
/// has no runtime; never destroyed, like the runtimes).
StorageCopies& copies(int device) {
  check_device(device);
  return made_once(registry().copies[device], [device] { return new StorageCopies(*make_backend(device).release()); });
}

/// Runs `f` for a C entry point returning int: its value, or -1 with the error remembered for
/// tierpack_gpu_last_error().
template <class F>
int status_of(const char* where, F&& f) noexcept {
  try {
    return f();
  } catch (const std::exception& e) {
    remember(std::string("tierpack: ") + where + ": " + e.what());
  } catch (...) {
    remember(std::string("tierpack: ") + where + ": unknown exception");
  }
  return -1;
}

template <class F>
void each_runtime(F&& f) {
  for (auto& d : registry().devices)
    if (GpuRuntime* rt = d.load(std::memory_order_acquire)) f(*rt);
}

/// Device `device`'s runtime if it exists (nothing was allocated there yet, or out of range: null).
GpuRuntime* existing_runtime(int device) {
  return device >= 0 && device < kMaxDevices ? registry().devices[device].load(std::memory_order_acquire) : nullptr;
}

GpuRuntime* runtime_owning(const void* p) {
  for (auto& d : registry().devices)
    if (GpuRuntime* rt = d.load(std::memory_order_acquire); rt && rt->owns(p)) return rt;
  return nullptr;
}

void report(const char* where, const std::exception& e) {
  const std::string msg = std::string("tierpack: ") + where + ": " + e.what();
  std::fprintf(stderr, "%s\n", msg.c_str());
  remember(msg);
}

thread_local std::string t_json;

}  // namespace
}  // namespace tierpack::gpu

using namespace tierpack::gpu;

namespace {
struct CudaOutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// *status: 0 allocated (or size 0), 1 out of memory under the budget, 2 any other failure.
void* malloc_or_report(ssize_t size, int device, void* stream, int* status) noexcept {
  *status = 0;
  try {
    if (size <= 0) return nullptr;
    return runtime(device).allocate(static_cast<std::size_t>(size), reinterpret_cast<StreamHandle>(stream));
  } catch (const tierpack::out_of_memory& e) {
    report("CUDA out of memory", e);
    *status = 1;
  } catch (const std::exception& e) {
    report("allocation failed", e);
    *status = 2;
  } catch (...) {
    remember("tierpack: allocation failed (unknown exception)");
    *status = 2;
  }
  return nullptr;
}
}  // namespace

/// PyTorch's pluggable-allocator malloc. Out of memory throws (Note [Out of memory through the
/// pluggable allocator]); PyTorch raises it as a RuntimeError with tierpack's message.
extern "C" void* tierpack_cuda_malloc(ssize_t size, int device, void* stream) {
  int status = 0;
  void* p = malloc_or_report(size, device, stream, &status);
  if (status != 0) throw CudaOutOfMemory(tierpack_gpu_last_error());
  return p;
}

/// The same, returning nullptr on failure (message in tierpack_gpu_last_error()): for callers that
/// raise their own error, such as a torch-side shim throwing c10::OutOfMemoryError.
extern "C" void* tierpack_cuda_malloc_nothrow(ssize_t size, int device, void* stream) {
  int status = 0;
  return malloc_or_report(size, device, stream, &status);
}

/// The same, saying why it returned nullptr: *status 0 (allocated, or size 0), 1 (out of memory under
/// the budget: the message in tierpack_gpu_last_error() names the budget, the tier and what is
/// resident), 2 (any other failure). What libtierpack_cuda_torch.so builds torch.OutOfMemoryError on.
extern "C" void* tierpack_cuda_malloc_status(ssize_t size, int device, void* stream, int* status) {
  int s = 0;
  void* p = malloc_or_report(size, device, stream, &s);
  if (status) *status = s;
  return p;
}

extern "C" void tierpack_cuda_free(void* ptr, ssize_t /*size*/, int device, void* /*stream*/) {
  try {
    if (!ptr) return;
    GpuRuntime* rt = existing_runtime(device);
    if (!rt || !rt->owns(ptr)) rt = runtime_owning(ptr);
    if (rt) rt->deallocate(ptr);
  } catch (const std::exception& e) {
    report("free failed", e);
  } catch (...) {
  }
}

extern "C" void tierpack_cuda_record_stream(void* ptr, void* stream) {
  try {
    if (GpuRuntime* rt = runtime_owning(ptr)) rt->record_stream(ptr, reinterpret_cast<StreamHandle>(stream));
  } catch (const std::exception& e) {
    report("record_stream failed", e);
  } catch (...) {
  }
}

/// `stream` may touch device `device`'s tierpack memory without allocating on it (a collective
/// library's stream, a side stream that only reads): the page-group mover holds it at its remap gates
/// (Note [Remap gate]). Returns 0, or -1 with tierpack_gpu_last_error() saying why (no runtime for
/// that device yet: call it after the device's first allocation).
extern "C" int tierpack_cuda_add_stream(int device, void* stream) {
  try {
    GpuRuntime* rt = existing_runtime(device);
    if (!rt) {
      remember("tierpack: add_stream: no runtime for CUDA device " + std::to_string(device) +
               " (nothing was allocated there yet)");
      return -1;
    }
    rt->add_stream(reinterpret_cast<StreamHandle>(stream));
    return 0;
  } catch (const std::exception& e) {
    report("add_stream failed", e);
    return -1;
  } catch (...) {
    return -1;
  }
}

extern "C" void tierpack_cuda_empty_cache(void) {
  try {
    each_runtime([](GpuRuntime& rt) { rt.empty_cache(); });
  } catch (const std::exception& e) {
    report("empty_cache failed", e);
  } catch (...) {
  }
}

/// Sets the settings before the first allocation: `conf` in TIERPACK_CONF syntax and `gpu` in
/// TIERPACK_GPU syntax (either may be null: the environment's value is used). Returns 0, or -1 with
/// tierpack_gpu_last_error() saying why (a bad setting, or called after the first allocation).
extern "C" int tierpack_gpu_configure(const char* conf, const char* gpu) {
  try {
    Registry& r = registry();
    std::lock_guard lk(r.m);
    for (auto& d : r.devices)
      if (d.load()) throw tierpack::logic_error("tierpack_gpu_configure: the allocator is already in use");
    const char* conf_text = conf ? conf : std::getenv("TIERPACK_CONF");
    const char* gpu_text = gpu ? gpu : std::getenv("TIERPACK_GPU");
    r.settings = tierpack::config_for_process(conf_text ? conf_text : "", gpu_text ? gpu_text : "");
    return 0;
  } catch (const std::exception& e) {
    Registry& r = registry();
    r.last_error = e.what();
    return -1;
  }
}

/// An iteration ended (optimizer step or tierpack.step()). Returns 1 when the next iteration is
/// traced, so the caller should report ops (tierpack_gpu_op_*), else 0.
extern "C" int tierpack_gpu_iteration(void) {
  int traced = 0;
  try {
    each_runtime([&](GpuRuntime& rt) { traced |= rt.iteration() ? 1 : 0; });
  } catch (const std::exception& e) {
    report("iteration boundary failed", e);
  } catch (...) {
  }
  return traced;
}

extern "C" int tierpack_gpu_tracing(void) {
  int traced = 0;
  each_runtime([&](GpuRuntime& rt) { traced |= rt.tracing() ? 1 : 0; });
  return traced;
}

extern "C" void tierpack_gpu_op_begin(std::int64_t /*op*/) {
  try {
    each_runtime([](GpuRuntime& rt) { rt.op_begin(); });
  } catch (...) {
  }
}

/// op_begin with the op's name (recorded in the runtime's profile, TIERPACK_CONF profile_out).
extern "C" void tierpack_gpu_op_begin_named(const char* name) {
  try {
    each_runtime([name](GpuRuntime& rt) { rt.op_begin(name ? name : ""); });
  } catch (...) {
  }
}

extern "C" void tierpack_gpu_op_tensor(const void* p) {
  try {
    if (GpuRuntime* rt = runtime_owning(p)) rt->op_tensor(p);
  } catch (...) {
  }
}

extern "C" void tierpack_gpu_op_tensors(const std::uint64_t* ptrs, std::int64_t n) {
  try {
    for (std::int64_t i = 0; i < n; ++i)
      if (GpuRuntime* rt = runtime_owning(reinterpret_cast<const void*>(ptrs[i]))) rt->op_tensor(reinterpret_cast<const void*>(ptrs[i]));
  } catch (...) {
  }
}

extern "C" void tierpack_gpu_op_end(std::int64_t /*op*/) {
  try {
    each_runtime([](GpuRuntime& rt) { rt.op_end(); });
  } catch (...) {
  }
}

/// JSON statistics of one device ("{}" when it has no runtime). Valid until the next call on this thread.
extern "C" const char* tierpack_gpu_stats_json(int device) {
  try {
    GpuRuntime* rt = existing_runtime(device);
    t_json = rt ? rt->stats_json() : "{}";
  } catch (const std::exception& e) {
    t_json = "{}";
    report("stats failed", e);
  }
  return t_json.c_str();
}

/// One of the allocator's counters by name (include/tierpack.h lists them); 0 without a runtime on `device`, or with
/// tierpack_gpu_last_error() naming an unknown counter.
extern "C" std::uint64_t tierpack_gpu_memory_stat(int device, const char* name) {
  try {
    const std::string_view n = name ? name : "";
    GpuRuntime* rt = existing_runtime(device);
    const tierpack::gpu::AllocatorStats s = rt ? rt->allocator_stats() : tierpack::gpu::AllocatorStats{};
    const std::pair<std::string_view, std::uint64_t> counters[] = {
        {"allocated", s.allocated},          {"allocated_peak", s.peak_allocated},
        {"reserved", s.device_handles},      {"reserved_peak", s.peak_device_handles},
        {"host", s.segment_bytes[1]},        {"gpu_budget", s.device_budget}};
    for (const auto& [counter, value] : counters)
      if (counter == n) return value;
    throw tierpack::logic_error("tierpack_gpu_memory_stat: unknown counter " + tierpack::quote_input(n) +
                                " (accepted: allocated, allocated_peak, reserved, reserved_peak, host, gpu_budget)");
  } catch (const std::exception& e) {
    remember(e.what());
  } catch (...) {
  }
  return 0;
}

/// The settings by name, parsed once (core/config.hpp) from tierpack_gpu_configure's texts, else from TIERPACK_CONF
/// and TIERPACK_GPU, with what the GPU runtime resolves (runtime_settings_json). nullptr with tierpack_gpu_last_error()
/// naming the bad key when they cannot be read.
extern "C" const char* tierpack_settings_json(void) {
  thread_local std::string out;
  try {
    Registry& r = registry();
    std::lock_guard lk(r.m);
    if (!r.settings) r.settings = tierpack::config_from_env();
    out = runtime_settings_json(*r.settings).dump();
    return out.c_str();
  } catch (const std::exception& e) {
    remember(e.what());
    return nullptr;
  }
}

extern "C" void tierpack_gpu_reset_peak(int device) {
  try {
    if (GpuRuntime* rt = existing_runtime(device)) rt->reset_peaks();
  } catch (...) {
  }
}

extern "C" const char* tierpack_gpu_last_error(void) {
  thread_local std::string copy;
  Registry& r = registry();
  std::lock_guard lk(r.m);
  copy = r.last_error;
  return copy.c_str();
}

/// The placer's plan for the storage mover (python/tierpack/planning.py): `trace_json` a SavedTrace,
/// `options_json` {"limit_bytes", "d2h_bytes_per_s", "h2d_bytes_per_s", "min_bytes"} (core/saved_trace.hpp,
/// placer/saved_plan.hpp). Returns the SavedPlan as JSON (valid until this thread's next call), or nullptr
/// with tierpack_gpu_last_error() naming the field that is wrong. Needs no GPU and no runtime.
extern "C" const char* tierpack_plan_saved(const char* trace_json, const char* options_json) {
  thread_local std::string out;
  try {
    if (!trace_json || !options_json) throw tierpack::logic_error("tierpack_plan_saved: trace and options are required");
    const tierpack::SavedTrace trace = tierpack::saved_trace_from_json(trace_json);
    const tierpack::SavedPlanOptions options = tierpack::saved_plan_options_from_json(options_json);
    out = tierpack::saved_plan_to_json(tierpack::placer::plan_saved_tensors(trace, options));
    return out.c_str();
  } catch (const std::exception& e) {
    remember(e.what());
    return nullptr;
  }
}

// The storage mover's copies (migrate/gpu/storage_copies.hpp; python/tierpack/copy_streams.py, Note [Raw copies]).
// Streams are CUDA stream handles (torch.cuda.Stream.cuda_stream; 0 is CUDA's default stream), events come from
// tierpack_copy_event_new. Each int-returning call returns -1 on failure, with tierpack_gpu_last_error() saying why.

/// Makes device `device`'s copies ready (loads the driver). 0, or -1 (no CUDA device, ...).
extern "C" int tierpack_copies_open(int device) {
  return status_of("storage copies", [&] {
    copies(device);
    return 0;
  });
}

/// A new event (no timing), or 0 with tierpack_gpu_last_error() saying why.
extern "C" std::uint64_t tierpack_copy_event_new(int device) {
  std::uint64_t e = 0;
  status_of("copy event", [&] {
    e = copies(device).new_event();
    return 0;
  });
  return e;
}

extern "C" void tierpack_copy_event_free(int device, std::uint64_t event) {
  status_of("copy event", [&] {
    if (event != 0) copies(device).free_event(event);
    return 0;
  });
}

/// 1 when the work `event` was recorded after has run (or it was never recorded), 0 when not yet, -1 on failure.
extern "C" int tierpack_copy_event_done(int device, std::uint64_t event) {
  return status_of("copy event query", [&] { return copies(device).done(event) ? 1 : 0; });
}

/// `stream` waits on the device for `event` (the host does not wait). 0, or -1.
extern "C" int tierpack_copy_stream_wait(int device, std::uint64_t stream, std::uint64_t event) {
  return status_of("stream wait", [&] {
    copies(device).wait(stream, event);
    return 0;
  });
}

/// Queues `n` copies (dst[i] <- src[i], bytes[i] bytes, in order) on `copy_stream`, after the work queued so far on
/// `after` when `after_set` (else no such wait) and after each of the `n_waits` events of `waits` (0 entries
/// skipped), then records `done` (0: none) on `copy_stream`. 0, or -1 (nothing queued when an address is null).
extern "C" int tierpack_copy_batch(int device, int after_set, std::uint64_t after, std::uint64_t copy_stream,
                                   const std::uint64_t* waits, int n_waits, const std::uint64_t* dst,
                                   const std::uint64_t* src, const std::uint64_t* bytes, int n, std::uint64_t done) {
  return status_of("storage copies", [&] {
    if (n < 0 || n_waits < 0 || (n > 0 && (!dst || !src || !bytes)) || (n_waits > 0 && !waits))
      throw tierpack::logic_error("tierpack_copy_batch: " + std::to_string(n) + " copies and " +
                                  std::to_string(n_waits) + " waits without their arrays");
    std::vector<StorageCopy> batch(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) batch[static_cast<std::size_t>(i)] = {dst[i], src[i], bytes[i]};
    std::vector<EventHandle> w(waits, waits + n_waits);
    copies(device).copy(after_set ? std::optional<StreamHandle>(after) : std::nullopt, copy_stream, w, batch, done);
    return 0;
  });
}
