// Flags shared by `tierpack plan` and `tierpack replay`: the tier model, the device, the fast-tier
// budget, the policy and the group size, turned into placer inputs. Bad values are usage errors.
#pragma once

#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/tier_spec.hpp"
#include "integrations/cli/args.hpp"
#include "placer/planner.hpp"

namespace tierpack::cli {

/// The help of --tiers, for the commands that plan (plan, replay, experiment).
inline constexpr const char* kTiersHelp =
    "tier model: a spec (gpu:24G,host:120G@55GB/s; dram:16G+cxl:64G@+80ns/36GB/s), a JSON file from `tierpack topo "
    "--json`, or preset:NAME (h200-pcie, ddr5-cxl, ddr5-remote-socket, ddr5-local); default: the tiers recorded in the "
    "profile";

struct PlannerInputs {
  TierModel model;
  placer::PlanOptions options;
};

/// Reads --tiers, --device, --gpu-budget / --fast-budget, --policy and --group-size (those present in
/// `args`). Defaults come from `plan` when one is given, else from the profile (its recorded tiers, the
/// device with the most tensor bytes).
PlannerInputs planner_inputs(const Args& args, const Profile& profile, const Plan* plan);

}  // namespace tierpack::cli
