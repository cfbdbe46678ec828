// The comparison `tierpack replay` prints: tierpack's plan next to the baseline policies, all simulated
// on the same profile, tier model and fast-tier budget.
#pragma once

#include <string>
#include <vector>

#include "core/plan.hpp"
#include "placer/planner.hpp"
#include "placer/replay.hpp"

namespace tierpack::placer {

struct Comparison {
  std::vector<ReplayResult> rows;  ///< all-fast, first-touch, interleave, lru, page-agnostic, page-aware
  double reference_step_ns = 0;    ///< all-fast step time (what slowdowns are relative to)
  std::uint64_t budget_bytes = 0;
  std::uint64_t peak_bytes = 0;    ///< the device's peak of live tensor bytes
  std::string fast_tier, slow_tier;
  int device = 0;
  std::vector<std::string> notes;
};

/// Simulates every policy. With `plan`, that plan is the page-aware row (its device and budget are
/// used unless `opts.fast_budget` is set); without, make_plan makes one.
Comparison compare_policies(const Profile& profile, const TierModel& model, const PlanOptions& opts,
                            const Plan* plan = nullptr);

/// The comparison as a fixed-width text table.
std::string format_comparison(const Comparison& c);

}  // namespace tierpack::placer
