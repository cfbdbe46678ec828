// Flags shared by `tierpack plan` and `tierpack replay`: the tier model, the device, the fast-tier
// budget, the policy and the group size, turned into placer inputs. Bad values are usage errors.
#pragma once

#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/tier_spec.hpp"
#include "integrations/cli/args.hpp"
#include "placer/planner.hpp"

namespace tierpack::cli {

struct PlannerInputs {
  TierModel model;
  placer::PlanOptions options;
};

/// Reads --tiers, --device, --gpu-budget / --fast-budget, --policy and --group-size (those present in
/// `args`). Defaults come from `plan` when one is given, else from the profile (its recorded tiers, the
/// device with the most tensor bytes).
PlannerInputs planner_inputs(const Args& args, const Profile& profile, const Plan* plan);

}  // namespace tierpack::cli
