// Tier models for planning and simulation: the tiers a plan may use (capacity, bandwidth, latency)
// and the copy links between them. A tier model is a Topology; this header builds one from what a
// user passes to `--tiers`:
//   - a spec string:  "gpu:24G,host:120G@55GB/s", "dram:16G+cxl:64G@+80ns/36GB/s"
//   - a JSON file in the form `tierpack topo --json` writes
//   - a preset shipped with tierpack: "preset:h200-pcie" (core/presets/*.json, each figure with its source)
// Grammar and meaning: see Note [Tier spec] in tier_spec.cpp and docs/simulator.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/topology.hpp"

namespace tierpack {

/// The tiers and links a plan or a simulation uses. Tier 0 of a spec is the fast tier.
using TierModel = Topology;

/// Parses a tier spec string. Tiers are separated by ',' or '+'; each is KIND[N]:CAPACITY[@ATTRS] where
/// ATTRS are '/'-separated bandwidth ("36GB/s") and latency ("140ns", or "+80ns" relative to the first
/// tier). For a GPU first tier, a host tier's bandwidth is the PCIe link between them. Throws
/// logic_error with a one-line message naming the bad part.
TierModel parse_tier_spec(std::string_view spec);

/// Parses a JSON tier model (`tierpack topo --json` form; extra keys are ignored). `origin` names the
/// text in error messages. Throws format_error.
TierModel tier_model_from_json_text(std::string_view text, std::string_view origin);

/// Reads a JSON tier model file. Throws os_error (cannot open) or format_error (bad content).
TierModel read_tier_model(const std::string& path);

/// Names of the presets built into tierpack, sorted.
std::vector<std::string> tier_preset_names();
/// The one-line description a preset file carries.
std::string tier_preset_description(std::string_view name);
/// A built-in preset; logic_error listing the known names when there is none of that name.
TierModel tier_preset(std::string_view name);

/// Resolves a `--tiers` argument: "preset:NAME", the path of an existing JSON file, or a spec string.
TierModel load_tier_model(std::string_view text);

/// Checks what a plan needs of a model: at least one tier, unique names, capacities > 0, positive
/// bandwidths and latencies, links between existing tiers. Throws logic_error naming the problem.
void validate_tier_model(const TierModel& model);

}  // namespace tierpack
