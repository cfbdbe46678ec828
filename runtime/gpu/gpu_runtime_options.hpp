// Options of the GPU runtime behind the PyTorch pluggable allocator: what TIERPACK_CONF says (budget,
// stats file, log level, warm-up iterations; core/config.hpp) plus GPU-tier knobs from
// TIERPACK_GPU="key:value,..." (docs in gpu_runtime_options.cpp's table).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/config.hpp"
#include "core/units.hpp"
#include "migrate/gpu/group_mover.hpp"
#include "runtime/phases.hpp"

namespace tierpack::gpu {

/// How the GPU tier moves tensors: storages through autograd's hooks under PyTorch's own allocator
/// (python/tierpack/activations.py, Note [Storage moves]), or VMM page groups remapped behind gates with
/// tierpack as PyTorch's allocator (this runtime).
enum class Mechanism { storage, vmm };

struct GpuRuntimeOptions {
  Budget budget;                                    ///< unset: the device's memory
  std::uint64_t chunk_bytes = std::uint64_t{32} << 20;
  std::uint64_t host_limit = std::uint64_t{64} << 30;
  bool spill = true;          ///< over budget, back chunks with host memory rather than fail
  bool migrate = true;        ///< trace an iteration, plan, move page groups (off: budgeted caching allocator)
  int warmup_iterations = 1;  ///< iterations before the traced one
  RunPhaseOptions phases;     ///< divergence_limit: TIERPACK_GPU divergences (Note [Diverged iterations])
  std::uint64_t group_bytes = std::uint64_t{512} << 20;
  double headroom = 0;         ///< 0: 0.85 (and no moves at all when the live peak fits the budget)
  bool move_persistent = true;
  bool host_resident = true;  ///< planner: persistent groups may stay on the host where moves cannot meet the budget
  std::uint64_t min_move_bytes = std::uint64_t{1} << 20;
  int eviction_lag = 4;       ///< planner: allocator events between an eviction's issue and its memory being free
  int prewarm_threads = 4;    ///< threads creating host handles for the plan's evictions
  std::string stats_out;
  std::string plan_out;
  std::string profile_out;    ///< write the observed iteration as a core Profile (tierpack-profile file)
  int remap_threads = 1;      ///< threads sharing a gated batch of remaps
  Verify verify = Verify::sampled;  ///< moves checked behind the gate (Note [Verified remaps])
  bool gate = true;  ///< off: diagnostic only, remaps run under the training's kernels (Note [Remap gate])
  RemapWhen remap_when = RemapWhen::eager;  ///< Note [When to remap]
  std::chrono::milliseconds remap_max_delay{20};
  std::size_t copy_piece = 0;  ///< chunk copies issued in pieces of this size (0: whole chunks)
  Mechanism mechanism = Mechanism::storage;  ///< how tensors leave the device (docs/config.md)
  /// storage: fraction of the budget the plan fills with live bytes (Note [Budget]); 0: 0.95 under a soft
  /// limit, 0.88 under a hard one (what the allocator cannot give back: Note [Reserved memory])
  double fill = 0;
  double storage_fill() const { return fill > 0 ? fill : hard_limit ? 0.88 : 0.95; }
  /// vmm: fraction of the budget the page-group plan fills (the allocator needs the rest for chunk
  /// rounding and caching).
  double vmm_headroom() const { return headroom > 0 ? headroom : 0.85; }
  /// A run whose recorded live peak is at most this fraction of its budget moves nothing, whatever `fill`
  /// or `headroom` ask (the allocator's rounding fits in the rest): storage 0.98 (Llama-style decoder at
  /// 100% moved 1.35 GB a step without it: bench/results/gpu-h200-2026-12-01, call 3), vmm 0.97. Python
  /// reads it by name (tierpack_gpu_options_json: "fits_fraction").
  double fits_fraction() const { return mechanism == Mechanism::storage ? 0.98 : 0.97; }
  bool recompute = true;  ///< storage: let go what can be made again first (placer Note [Recompute])
  /// storage: at its first plan the mover leaves the objects alive then out of Python's later collections
  /// (gc.freeze: python/tierpack/python_collector.py, Note [Python's collector]); false: the collector as it was
  bool gc_freeze = true;
  /// storage: the optimizer step updates a chunk at a time, fetching each chunk's state just before (placer/
  /// saved_plan.cpp, Note [Streamed step]); false (the default): the step needs all its state back first
  bool stream_step = false;
  /// storage: true (TIERPACK_GPU autocast_cache:on): autocast keeps its cache of casts of parameters, as the program
  /// set it; false (the default): tierpack turns the cache off, so each cast is a saved storage the plan may let go in
  /// forward (python/tierpack/cuda.py autocast_cache; 1.36 GiB held through forward on the Llama-style decoder,
  /// its recorded step 171.5 ms without the cache, 171.2 with it: bench/results/gpu-h200-2026-12-06-1, calls 2-3)
  bool autocast_cache = false;
  /// storage: true (TIERPACK_GPU copies:raw, the default): the mover's copies, their waits and events are one call
  /// into libtierpack_cuda.so per batch (migrate/gpu/storage_copies.hpp); false (copies:torch): through torch's
  /// Python API (python/tierpack/copy_streams.py, Note [Raw copies])
  bool raw_copies = true;
  /// storage: once a plan fits, the budget is PyTorch's memory limit: the allocator gives its cached pages
  /// back when it would pass it (Note [Reserved memory]), and raises out of memory past it; false (the
  /// default): soft
  bool hard_limit = false;
  LogLevel log = LogLevel::info;
};

/// Defaults from $TIERPACK_CONF, then $TIERPACK_GPU. Throws logic_error naming a bad key or value.
GpuRuntimeOptions gpu_options_from_env();
/// Applies "key:value,..." (TIERPACK_GPU syntax) over `base`.
GpuRuntimeOptions parse_gpu_options(std::string_view text, GpuRuntimeOptions base);
/// Applies a TIERPACK_CONF text (core keys) over `base`.
GpuRuntimeOptions apply_core_config(const Config& c, GpuRuntimeOptions base);

}  // namespace tierpack::gpu
