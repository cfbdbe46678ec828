// Plan checking: the fast-tier accounting every plan obeys, and a checker that verifies a plan against
// its profile (used by the property tests, by `tierpack replay --plan`, and by the planner itself).
//
// Note [Fast-tier accounting]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Budgets are checked per op: a group holds fast-tier memory during op i when it is alive at i and is
// on the fast tier or moving to or from it. A group starts on its `home` tier (when the iteration
// starts, or when its first tensor is born). An eviction (issue_after a, needed_by f) keeps holding the
// memory through op f - 1 (the copy runs while ops a+1 .. f-1 run) and frees it from op f on; f is
// kAfterIteration when the copy only has to finish by the iteration's end. A prefetch (issue_after p,
// needed_by b) holds fast memory from op p + 1 on (the destination is allocated when the copy starts)
// and must have arrived before op b begins. A group must not move while an op uses it: no use falls
// strictly between a move's issue_after and needed_by. The runtime (and the simulator) make a
// prefetch wait for memory when evictions finish later than planned; the budget is never exceeded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/plan.hpp"
#include "core/profile.hpp"
#include "placer/pack.hpp"

namespace tierpack::placer {

/// Fast-tier bytes held during each op (Note [Fast-tier accounting]). `moves` may be in any order.
std::vector<std::uint64_t> fast_occupancy(const std::vector<PageGroup>& groups, const std::vector<GroupLife>& lives,
                                          const std::vector<Move>& moves, TierId fast, OpIndex n_ops);

/// When each of a plan's groups exists and is used, recomputed from the profile.
std::vector<GroupLife> group_lives(const Profile& profile, const Plan& plan);

/// Whether a device (-1 host) can read a tier in place: a GPU reads its own memory and, through
/// always-mapped VMM page groups, host and far memory; the CPU reads host and far memory.
bool readable_by(int device, const Tier& tier);

struct PlanCheck {
  std::vector<std::string> problems;      ///< empty when the plan is consistent with the profile
  std::vector<std::uint64_t> occupancy;   ///< fast-tier bytes per op
  std::uint64_t fast_peak = 0;
  std::uint64_t in_place_uses = 0;        ///< uses served from the slow tier
  bool ok() const { return problems.empty(); }
};

/// Checks a plan against the profile it was made for: placements match tensors, groups hold their
/// tensors, moves alternate between the plan's two tiers, no group moves while it is used, every use
/// finds its group resident on a tier the device can read (and a group that moves at all on the fast
/// tier: only groups that never move are read in place), steady state (groups alive across
/// iterations end where they started), pinned groups never move, and the fast tier stays within the
/// budget at every op. Reports at most `max_problems` problems.
PlanCheck check_plan(const Profile& profile, const Plan& plan, std::size_t max_problems = 20);

}  // namespace tierpack::placer
