// Calibrated-model mode of `tierpack experiment`: every policy at every fast-tier budget, simulated by
// placer/ on a tier model (a preset with published or measured figures, a spec, or a topo file).
// Kernel tiering and DAMON have no model in the simulator; their rows say "not available" and why.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/profile.hpp"
#include "core/tier_spec.hpp"
#include "core/units.hpp"
#include "experiment/experiment_result.hpp"
#include "placer/planner.hpp"

namespace tierpack::experiment {

using tierpack::BudgetPoint;        // core/units.hpp
using tierpack::parse_budget_list;  // core/units.hpp

using ProgressFn = std::function<void(const std::string&)>;

struct ModelOptions {
  std::vector<BudgetPoint> budgets;
  std::vector<std::string> policies;  ///< names from kPolicies
  placer::PlanOptions plan;           ///< device, group size (fast_budget is set per point)
  ProgressFn progress;                ///< one line per step, may be empty
  bool op_times_scaled = false;       ///< the profile's op times were scaled to a measured step (--compute-time)
};

ExperimentResult run_model_experiment(const Profile& profile, const TierModel& model, const ModelOptions& opts);

}  // namespace tierpack::experiment
