// "What tierpack would save": for a few fast-tier budgets, how much fast memory a budget frees and
// what moving the rest costs. Without the planner this is an estimate from the profile alone (see
// Note [Profile-only savings estimate]); a given plan and run add the planner's prediction and
// the measured counters as rows of their own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/profile.hpp"
#include "report/timeline.hpp"

namespace tierpack::report {

struct SavingsRow {
  std::string label;              ///< "50% of peak", "plan budget", "measured run"
  std::string source;             ///< "estimate", "plan", "run"
  std::uint64_t budget_bytes = 0;
  std::uint64_t saved_bytes = 0;  ///< fast memory freed: peak - budget (0 when the budget is above the peak)
  bool feasible = true;           ///< estimate: every step fits after offloading idle tensors
  std::uint64_t shortfall_bytes = 0;  ///< estimate: the most that still did not fit at one step
  std::uint64_t bytes_to_slow = 0;    ///< per iteration
  std::uint64_t bytes_to_fast = 0;
  double copy_ns = 0;        ///< busiest direction at the link bandwidth
  double step_ns = 0;        ///< estimate: lower bound max(iteration, copy); plan: predicted; run: measured mean
  double stall_ns = 0;       ///< plan: predicted; run: measured mean per iteration
  std::uint64_t tensors_moved = 0;  ///< estimate: distinct tensors offloaded at least once
};

struct Savings {
  int device = -1;
  std::uint64_t peak_bytes = 0;
  double iteration_ns = 0;
  double bandwidth = 0;          ///< bytes/s per direction
  std::string bandwidth_source;  ///< "topology link gpu0->dram0", "--link-bandwidth", "assumed (PCIe gen5 x16 pinned)"
  bool planner_used = false;     ///< rows come from the placer/simulator (false: profile-only estimate)
  std::string method;            ///< one sentence: how the estimate rows were computed
  std::vector<SavingsRow> rows;
};

/// Profile-only estimate for one device at one budget.
SavingsRow estimate_offload(const Profile& profile, const TimeAxis& axis, int device, std::uint64_t peak,
                            std::uint64_t budget, double bandwidth);

}  // namespace tierpack::report
