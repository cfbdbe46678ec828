// Replay: the simulator. Runs a profiled iteration again under a plan on a tier model and reports what
// it would cost: step time, stalls (ops waiting for prefetches or for fast memory), time lost reading
// the slow tier in place, fast-tier occupancy over time, bytes moved each way, and pages holding tensors
// of different lifetime classes. The planner uses it for its predictions; `tierpack replay` compares a
// plan with baseline policies (placer/baselines.hpp). What is and is not modelled: docs/simulator.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/tier_spec.hpp"
#include "placer/pack.hpp"

namespace tierpack::placer {

struct OccupancySample {
  double time_ns = 0;
  std::uint64_t fast_bytes = 0;
};

/// When one scheduled move ran in the simulation.
struct MoveTiming {
  double start_ns = -1;  ///< -1: never ran (its group was gone or already there)
  double end_ns = -1;
  double late_ns = 0;    ///< prefetches: how long the op that needed it waited
};

struct ReplayResult {
  std::string policy;
  bool fits = true;                  ///< false: the policy cannot run within the budget (all-fast)
  double step_ns = 0;                ///< iteration time, including draining copies still running
  double stall_ns = 0;               ///< ops waiting for prefetches, demand migrations or fast memory
  double in_place_ns = 0;            ///< extra op time from reading the slow tier in place
  double remap_hold_ns = 0;          ///< compute held behind remap gates (GPU tier; not overlapped with stalls)
  std::uint64_t bytes_to_fast = 0, bytes_to_slow = 0;  ///< copied between the tiers
  std::uint64_t in_place_bytes = 0;  ///< bytes of tensors ops touched on the slow tier (they cross the link too)
  std::uint64_t moves_to_fast = 0, moves_to_slow = 0;
  std::uint64_t fast_peak_bytes = 0; ///< highest fast-tier occupancy over time
  std::uint64_t budget_bytes = 0;
  std::uint64_t mixed_class_pages = 0;   ///< pages holding live tensors of different classes at once
  std::uint64_t mixed_class_groups = 0;  ///< plan policies: groups holding tensors of different classes
  std::uint32_t budget_overruns = 0; ///< times memory ran out and the replay exceeded the budget rather than deadlock
  std::uint32_t skipped_moves = 0;   ///< moves that did not apply (plan made for another profile?)
  std::vector<OccupancySample> occupancy;  ///< after each op
  std::vector<MoveTiming> moves;           ///< plan replays: one per schedule entry
  std::string note;
};

struct ReplayOptions {
  bool record_occupancy = true;
  bool count_mixed_pages = true;
};

/// Replays `profile` under `plan` on `model` (the plan's fast and slow tiers are looked up by name in the
/// model, so a plan can be replayed on a model with other figures). The plan's budget is a hard limit:
/// a prefetch or an allocation waits until evictions have freed the memory.
ReplayResult replay_plan(const Profile& profile, const Plan& plan, const TierModel& model, const ReplayOptions& opts = {});

/// The same, with the groups' lives already known (the planner has them; saves reclassifying).
ReplayResult replay_plan(const Profile& profile, const Plan& plan, const TierModel& model, const ReplayOptions& opts,
                         std::vector<GroupLife> lives);

}  // namespace tierpack::placer
