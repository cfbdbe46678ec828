// What the GPU runtime reads from the settings (core/config.hpp, parsed once from TIERPACK_CONF and its alias
// TIERPACK_GPU): the defaults that depend on other keys, and where it writes its profile. The runtime takes the
// whole Config; the keys and their defaults are docs/config.md's table.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/config.hpp"

namespace tierpack::gpu {

/// storage: fraction of the budget the plan fills with live bytes (Note [Budget]); gpu_fill, else 0.95 under a soft
/// limit and 0.88 under a hard one (what the allocator cannot give back: Note [Reserved memory]).
double storage_fill(const Config& c);
/// vmm: fraction of the budget the page-group plan fills (the allocator needs the rest for chunk rounding and
/// caching): gpu_headroom, else 0.85.
double vmm_headroom(const Config& c);
/// A run whose recorded live peak is at most this fraction of its budget moves nothing, whatever `fill` or
/// `headroom` ask (the allocator's rounding fits in the rest): storage 0.98 (Llama-style decoder at 100% moved
/// 1.35 GB a step without it: bench/results/gpu-h200-2026-12-01, call 3), vmm 0.97.
double fits_fraction(const Config& c);
/// Where the runtime writes its observed iteration as a Profile: gpu_profile_out, else next to the host's
/// profile_out (tierpack run -o run.tpk: run.gpu<N>.tpk, <N> filled in by the runtime), else nowhere ("").
std::string gpu_profile_path(const Config& c);
/// The settings by name (settings_json) with what the runtime resolves: gpu_fill and gpu_headroom as used, and
/// gpu_fits_fraction. What Python reads (tierpack_settings_json in include/tierpack.h).
nlohmann::json runtime_settings_json(const Config& c);

}  // namespace tierpack::gpu
