// "What tierpack would save": for a few fast-tier budgets, the placer plans the profiled iteration
// (placer/planner.hpp) and its simulator predicts the cost; the table shows how much fast memory each
// budget frees and what the plan moves and costs. A given plan and a measured run add rows of their
// own. See Note [Savings from the planner].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/profile.hpp"
#include "core/tier_spec.hpp"
#include "core/units.hpp"

namespace tierpack::report {

struct SavingsRow {
  std::string label;              ///< "50% of peak", "plan (page-aware)", "measured run"
  std::string source;             ///< "planner", "plan", "run"
  std::uint64_t budget_bytes = 0;
  std::uint64_t fast_peak_bytes = 0;  ///< highest fast-tier occupancy the plan predicts (or the run measured)
  std::uint64_t saved_bytes = 0;  ///< fast memory freed: the device's peak minus fast_peak_bytes
  bool fits = true;               ///< the fast tier stays within the budget
  std::uint64_t bytes_to_slow = 0;    ///< per iteration
  std::uint64_t bytes_to_fast = 0;
  std::uint64_t moves = 0;
  double copy_ns = 0;             ///< busier direction alone at the link bandwidth
  double step_ns = 0;             ///< predicted (planner, plan) or measured mean (run)
  double stall_ns = 0;
  bool stall_measured = true;     ///< false: a run whose runtime does not wait (Note [Run counters])
  double late_prefetches = 0;     ///< measured run: per iteration (Note [Run counters])
  std::string note;               ///< why there is no plan, or the planner's notes
};

struct Savings {
  int device = -1;
  std::uint64_t peak_bytes = 0;
  double iteration_ns = 0;
  std::string model;             ///< the tier model's tiers, e.g. "gpu0 141 GiB, dram0 512 GiB"
  std::string model_source;      ///< "--tiers preset:h200-pcie", "the profile's tiers", "assumed: ..."
  double bandwidth = 0;          ///< fast -> slow link, bytes/s (0: unknown)
  std::string method;            ///< one sentence on how the rows were computed
  /// Why the predicted rows are lower bounds (Note [Lower-bound predictions] in placer/prediction_bound.hpp).
  std::vector<std::string> lower_bound;
  std::vector<SavingsRow> rows;
};

/// Plans the device's tensors at each budget (in parallel: plans are independent, pure computations)
/// and returns one row per budget, in the order given. A budget the planner cannot plan for gives a
/// row with its message in `note`.
std::vector<SavingsRow> plan_at_budgets(const Profile& profile, const TierModel& model, int device, std::uint64_t peak,
                                        const std::vector<std::pair<Budget, std::string>>& budgets);

/// Copy bandwidth from the fast to the slow tier the planner would use for `device` (0 when unknown).
double fast_to_slow_bandwidth(const TierModel& model, int device);

}  // namespace tierpack::report
