// Run-time configuration from TIERPACK_CONF="key:value,key:value" (what `tierpack run/profile` set
// for the child process, and what a LibTorch program can set itself). Strict: an unknown key or a bad
// value is a logic_error naming the key and the accepted values. Keys and meanings: docs/config.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/units.hpp"

namespace tierpack {

enum class RunMode : std::uint8_t { off, profile, run };
enum class PageTracerKind : std::uint8_t { automatic, mprotect, uffd, off };
enum class LogLevel : std::uint8_t { quiet, info, debug };

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

  /// The accepted keys, for error messages and docs.
  static const std::vector<std::string_view>& keys();
};

/// Parses "key:value,key:value". Empty text gives the defaults. Throws logic_error.
Config parse_config(std::string_view text);
/// Parses $TIERPACK_CONF (defaults when unset); `%r` in its paths becomes this process's rank
/// (core/process_rank.hpp, Note [Per-rank files]).
Config config_from_env();
/// parse_config(text) with "%r" in its file paths replaced by this process's rank (from the
/// launcher's environment, 0 without one): what config_from_env() does with TIERPACK_CONF.
Config config_for_process(std::string_view text);
/// Inverse of parse_config for the keys that differ from the defaults.
std::string format_config(const Config& c);

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
