// Run-time settings from TIERPACK_CONF="key:value,key:value" (what `tierpack run/profile` set for the child
// process, and what a LibTorch program can set itself), the GPU tier's keys (gpu_*) among them, with
// TIERPACK_GPU="key:value,..." an alias for those (`limit:hard` is `gpu_limit:hard`). One parser, one struct: the
// host runtime, the GPU runtime and the CLI read Config; Python reads it by name (settings_json through the C ABI,
// include/tierpack.h). Strict: an unknown key or a bad value is a logic_error naming the key and the accepted
// values. Keys and meanings: docs/config.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/units.hpp"

namespace tierpack {

enum class RunMode : std::uint8_t { off, profile, run };
enum class PageTracerKind : std::uint8_t { automatic, mprotect, uffd, off };
enum class LogLevel : std::uint8_t { quiet, info, debug };

namespace gpu {
/// How the GPU tier moves tensors: storages through autograd's hooks under PyTorch's own allocator
/// (python/tierpack/activations.py, Note [Storage moves]), or VMM page groups remapped behind gates with
/// tierpack as PyTorch's allocator (runtime/gpu/gpu_runtime.hpp).
enum class Mechanism : std::uint8_t { storage, vmm };
/// Which moves are checked behind the gate (Note [Verified remaps]): none; evictions only; evictions
/// in full and prefetches by samples (64 KiB of every MiB); everything in full.
enum class Verify : std::uint8_t { off, evictions, sampled, all };
/// When a worker remaps the chunks whose copies are done (Note [When to remap]).
enum class RemapWhen : std::uint8_t { eager, idle };
/// autocast's cache of its casts of parameters under the storage mover (python/tierpack/cuda.py, Note [Autocast's
/// cache]): turned off when the run does not fit its budget with it (automatic), kept (on), or turned off (off).
enum class AutocastCache : std::uint8_t { automatic, on, off };
}  // namespace gpu

/// The run's phases (runtime/phases.hpp, Note [Diverged iterations]), on the host and on the GPU alike.
struct RunPhaseOptions {
  /// Diverged iterations in a row that turn the plan off (1: the first); TIERPACK_CONF `gpu_divergences`.
  int divergence_limit = 3;
};

/// The GPU tier's keys (gpu_<name> in TIERPACK_CONF, <name> in TIERPACK_GPU; docs/config.md). Its budget, statistics
/// file, log level and warm-up are Config's own (gpu_budget, stats_out, log, warmup_iterations).
struct GpuConfig {
  gpu::Mechanism mechanism = gpu::Mechanism::storage;  ///< how tensors leave the device
  // vmm (the page-group runtime, runtime/gpu/gpu_runtime.hpp)
  std::uint64_t chunk_bytes = std::uint64_t{32} << 20;
  std::uint64_t host_limit = std::uint64_t{64} << 30;
  bool spill = true;          ///< over budget, back chunks with host memory rather than fail
  bool migrate = true;        ///< trace an iteration, plan, move page groups (off: budgeted caching allocator)
  RunPhaseOptions phases;     ///< diverged iterations in a row before the plan is given up (divergence_limit)
  std::uint64_t group_bytes = std::uint64_t{512} << 20;
  double headroom = 0;        ///< 0: the default (0.85; runtime/gpu/gpu_runtime_options.hpp)
  bool move_persistent = true;
  bool host_resident = true;  ///< planner: persistent groups may stay on the host where moves cannot meet the budget
  std::uint64_t min_move_bytes = std::uint64_t{1} << 20;
  int eviction_lag = 4;       ///< planner: allocator events between an eviction's issue and its memory being free
  int prewarm_threads = 4;    ///< threads creating host handles for the plan's evictions
  std::string plan_out;       ///< write the plan the runtime made (JSON)
  std::string profile_out;    ///< write the observed iteration as a Profile (empty: next to Config::profile_out)
  int remap_threads = 1;      ///< threads sharing a gated batch of remaps
  gpu::Verify verify = gpu::Verify::sampled;  ///< moves checked behind the gate (Note [Verified remaps])
  bool gate = true;  ///< off: diagnostic only, remaps run under the training's kernels (Note [Remap gate])
  gpu::RemapWhen remap_when = gpu::RemapWhen::eager;  ///< Note [When to remap]
  std::chrono::milliseconds remap_max_delay{20};
  std::size_t copy_piece = 0;  ///< chunk copies issued in pieces of this size (0: whole chunks)
  // storage (python/tierpack/activations.py)
  double fill = 0;             ///< budget fraction the plan fills with live bytes; 0: the default (Note [Budget])
  bool recompute = true;       ///< let go what can be made again first (placer Note [Recompute])
  bool gc_freeze = true;       ///< gc.freeze() at the first plan (Note [Python's collector]); false: as-is
  bool stream_step = false;    ///< the optimizer step a chunk at a time (Note [Streamed step]); false: whole
  bool compile_blocks = true;  ///< a graph break before each block under torch.compile (Note [Compile per block])
  gpu::AutocastCache autocast_cache = gpu::AutocastCache::automatic;  ///< Note [Autocast's cache] (cuda.py)
  bool raw_copies = true;      ///< copies through libtierpack_cuda.so (Note [Raw copies]); false: through torch
  bool hard_limit = false;     ///< once a plan fits the budget is PyTorch's memory limit (Note [Reserved memory])
};

struct Config {
  RunMode mode = RunMode::off;
  Budget gpu_budget;                 ///< GPU fast-tier budget (run on CUDA)
  Budget fast_budget;                ///< host fast-tier budget (CPU runs on NUMA tiers)
  std::string tiers;                 ///< tier spec (core/tier_spec.hpp); tiers joined by '+' here
  std::string profile_out;           ///< where to write the profile
  std::string plan_in;               ///< use this plan instead of planning
  std::string stats_out;             ///< where to write run counters (JSON)
  int warmup_iterations = 1;         ///< iterations before the profiled one
  int profile_iterations = 1;        ///< iterations observed to build the profile
  int max_iterations = 0;            ///< stop recording after this many (0 = unlimited)
  PageTracerKind page_tracer = PageTracerKind::automatic;
  int page_window_depth = 1;         ///< ops nested less deeply than this close page windows (1: top-level)
  LogLevel log = LogLevel::info;
  bool python_source = true;         ///< profiles record the Python line of each allocation (Note [Python source])
  GpuConfig gpu;                     ///< the gpu_* keys

  /// The accepted keys, for error messages and docs.
  static const std::vector<std::string_view>& keys();
};

/// Parses "key:value,key:value" (TIERPACK_CONF) and `gpu_alias` (TIERPACK_GPU: "limit:hard" for "gpu_limit:hard").
/// Empty text gives the defaults. A key given both ways with different values is an error naming both. Throws
/// logic_error.
Config parse_config(std::string_view text, std::string_view gpu_alias = {});
/// Parses $TIERPACK_CONF and $TIERPACK_GPU (defaults when unset); `%r` in the paths of TIERPACK_CONF's host keys
/// becomes this process's rank (core/process_rank.hpp, Note [Per-rank files]).
Config config_from_env();
/// parse_config(text, gpu_alias) with "%r" in the host keys' file paths replaced by this process's rank (from the
/// launcher's environment, 0 without one): what config_from_env() does with TIERPACK_CONF and TIERPACK_GPU.
Config config_for_process(std::string_view text, std::string_view gpu_alias = {});
/// Inverse of parse_config for the keys that differ from the defaults (TIERPACK_CONF syntax).
std::string format_config(const Config& c);
/// Every key by its TIERPACK_CONF name, as JSON: switches true/false, choices their word, numbers and sizes (in
/// bytes) numbers, budgets {"bytes": N} or {"fraction": F} (null: none), gpu_fill and gpu_headroom null when left
/// to their defaults (which the GPU runtime resolves: runtime/gpu/gpu_runtime_options.hpp).
nlohmann::json settings_json(const Config& c);

/// Note [Host side steps aside]
/// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
/// `tierpack run --gpu-budget X -- cmd` with no --fast-budget, --plan, --tiers or -o gives the host side
/// nothing to do: with no fast budget every CPU tensor stays in DRAM and no profile is asked for. Yet it
/// profiled an iteration anyway: on the H200 a Hugging Face GPT-2 run's profiled iteration took 7.74 s
/// (14,386 ops under the op observer and the page tracer) for 1.71 KiB of CPU tensors
/// (bench/results/gpu-h200-2026-12-02, call 4). So where the GPU tier is installed and this says no, the
/// Python bootstrap does not enable the host side, and says so; `tierpack run` then reports the GPU tier
/// alone. Without a GPU tier (no CUDA device) the host side runs as before.
bool host_side_needed(const Config& c);

}  // namespace tierpack
