// The placer's entry point: Profile + tier model + options -> Plan. Pure and deterministic:
//   classify (classify.hpp) -> pack into page groups (pack.hpp) -> assign tiers under the fast-tier
//   budget (assign.hpp) -> schedule evictions and prefetches (schedule.hpp) -> predict with the
//   simulator (replay.hpp), moving late prefetches earlier where the budget allows.
// Policies: "page-aware" (default: class-pure page groups) and "page-agnostic" (the same schedule
// over groups packed in allocation order, to measure what page-aware packing buys).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/tier_spec.hpp"
#include "core/units.hpp"

namespace tierpack::placer {

struct PlanOptions {
  int device = 0;                   ///< whose tensors to place: -1 host, >= 0 a GPU
  Budget fast_budget;               ///< unset: the fast tier's capacity; a percentage is of the device's peak
  std::string policy = "page-aware";
  std::uint64_t group_bytes = 0;    ///< target shared-group size (0: 32 MiB on a GPU tier, 2 MiB on a host tier)
  double transfer_slack = 1.0;      ///< plan copies as if they took this much longer
  int refine_rounds = 3;            ///< simulate-and-advance-late-prefetches rounds
};

/// The policies make_plan accepts.
std::span<const std::string_view> plan_policies();

/// The device whose tensors hold the most bytes in the profile (-1 host when it has no GPU tensors).
int main_device(const Profile& profile);

/// The fast-tier budget in bytes for these options (capped at the fast tier's capacity).
std::uint64_t resolve_budget(const Profile& profile, const TierModel& model, const PlanOptions& opts);

/// Makes a plan. A budget below what must stay resident is met by spilling groups to the slow tier
/// (read in place); a device without tensors gets an empty plan. Throws logic_error for an unknown
/// policy, an invalid model, or a single-tier model that cannot hold the run within the budget.
Plan make_plan(const Profile& profile, const TierModel& model, const PlanOptions& opts);

}  // namespace tierpack::placer
